"""NoLiMa (`nolima/needles`, `nolima/hard`): needles with no literal overlap with their question: task.py.
"""
