"""Logging: the metrics tracker, eval aggregation, run reports and plots."""
