"""Trainers (MAGRPO and the preference algorithms), their schedules, and the shared rollout and loss code."""
