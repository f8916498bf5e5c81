"""Runs that survive: the run directory's records (status, launch.log, refusal to reuse), saved actors'
loading for mode=eval, and (travel/checkpoint/store.py) checkpoints and resume."""
