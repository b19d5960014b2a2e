"""JSON key-value retrieval by gold position (`kv/retrieval`; "Lost in the Middle"): task.py.
"""
