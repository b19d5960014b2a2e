"""The run engine's scoring: one batch (batch.py), the schedules that say what to score next (full.py, sequential.py)
and the one loop that drives any of them (loop.py). runner.py plans (planning.py), records and calls it."""
