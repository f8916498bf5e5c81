"""Results across runs: `python -m travel.report RUN_OR_SWEEP_DIR...` (see __main__.py)."""
