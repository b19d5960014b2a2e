"""LongBench (THUDM): v1 and LongBench-E (`longbench/<dataset>`, `longbench/<dataset>_e`) in task.py, LongBench v2
(`longbench2`) in v2.py, and the official metrics in metrics.py.
"""
