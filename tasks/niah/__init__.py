"""Needle in a haystack over a length x depth grid (`niah/single`, `niah/multi`): grid.py.
"""
