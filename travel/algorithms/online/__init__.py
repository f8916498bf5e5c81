"""The online trainers: MAGRPO, and MARLHF, which runs MAGRPO's loop on a fitted reward model's score."""
