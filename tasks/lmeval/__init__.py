"""Short-context benchmarks run by lm-evaluation-harness through ctxbench's backends (`lmeval/<name>`).

task.py registers the tasks; adapter.py is the lm-eval model that calls a ctxbench backend; results.py reads lm-eval's
results back into store rows and aggregates.
"""
