"""Pure statistics below both the run engine (harness/run/) and the leaderboard: no I/O, numpy and scipy only.

proportions.py: intervals for a proportion or a bounded mean (Clopper–Pearson, its matched effective-n form);
sequential.py: the anytime-valid confidence sequences of `ctxbench score --until` and the board's sequential intervals.
"""
