"""Per-cell random generators for the intervals and tests of :mod:`leaderboard.stats`.

Each cell gets its own generator seeded from (seed, cell key), so a cell's interval or p-value does not change
when other models or tasks are added to the board.
"""

from __future__ import annotations

import zlib

import numpy as np


def cell_rng(seed: int, *key: object) -> np.random.Generator:
    """A generator that depends only on the seed and the cell's key."""
    return np.random.default_rng([seed, zlib.crc32(repr(key).encode())])
