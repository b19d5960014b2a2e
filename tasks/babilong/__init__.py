"""BABILong (`babilong/qa1` ... `babilong/qa10`): bAbI facts hidden in PG-19 text.

task.py reads the official items and registers the tasks; prompts.py holds the official instructions, examples and
post-prompts per task.
"""
