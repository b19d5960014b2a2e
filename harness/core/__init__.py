"""The core layer: types, registry, prompting, fitting, generation context, store, I/O.

It imports nothing from tasks, trainers, leaderboard, backends or the CLI; they all build on it.
"""
