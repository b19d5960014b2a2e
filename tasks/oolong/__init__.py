"""Oolong (Bertsch et al. 2025): long-context aggregation over official context windows, synth and real splits.

items.py reads the official rows into windows, scoring.py is the official answer parsing and scoring, tasks.py the
`oolong/synth` and `oolong/real` tasks (importing the package registers them).
"""
