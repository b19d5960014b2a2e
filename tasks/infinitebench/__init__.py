"""InfiniteBench (`infinitebench/<task>`, OpenBMB/InfiniteBench).

task.py registers the official tasks with their prompts; synth.py the three synthetic tasks generated at any length
(`infinitebench/<task>_synth`); metrics.py the official scorers.
"""
