"""The run engine. It imports the core, the backends and the tasks, never the leaderboard or the CLI
(tests/test_layers.py); the statistics it shares with the board are in harness/core/stats/.

planning.py (with plan_bounds.py, plan_inputs.py, plan_size.py, judge_budget.py) checks a plan before anything is
written; runner.py records the run and hands its cells to the one scoring loop, loop.py, which drives a schedule:
full.py (every sample at full N), sequential.py (--until rounds; the rule and adaptive.json in until.py, its
refusals in sequential_checks.py) or external.py (tasks another harness scores whole: lm-eval). batch.py scores one
batch: requests, the thinking split, rows, log-prob rows.
"""
