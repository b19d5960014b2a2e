"""The run engine's scoring: one batch (batch.py), the schedules that say what to score next (full.py, sequential.py)
and the one loop that drives any of them (loop.py). harness/runner.py plans, records and calls it."""
