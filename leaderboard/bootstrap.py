"""Vectorised percentile bootstrap helpers.

Each cell gets its own generator seeded from (seed, cell key), so a cell's
interval does not change when other models or tasks are added to the frame.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

# Cap on index-matrix entries drawn at once; larger cells are drawn in row blocks.
_MAX_DRAW = 8_000_000


def cell_rng(seed: int, *key: object) -> np.random.Generator:
    """A generator that depends only on the seed and the cell's key."""
    return np.random.default_rng([seed, zlib.crc32(repr(key).encode())])


def boot_means(values: np.ndarray, *, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_boot`` resamples (with replacement) of ``values``; shape (n_boot,)."""
    values = np.asarray(values, dtype=float)
    n = values.size
    if n == 0:
        return np.full(n_boot, np.nan)
    rows = max(1, _MAX_DRAW // n)
    if rows >= n_boot:
        return values[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
    blocks = [
        values[rng.integers(0, n, size=(min(rows, n_boot - start), n))].mean(axis=1)
        for start in range(0, n_boot, rows)
    ]
    return np.concatenate(blocks)


def stratified_boot_means(
    strata: Sequence[np.ndarray], *, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap the unweighted mean of stratum means, resampling within each stratum."""
    draws = np.stack([boot_means(s, n_boot=n_boot, rng=rng) for s in strata])
    return draws.mean(axis=0)


def percentile_ci(draws: np.ndarray, *, ci: float) -> tuple[float, float]:
    """Two-sided percentile interval of bootstrap draws."""
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    if np.isnan(draws).all():
        return float("nan"), float("nan")
    tail = (1 - ci) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return float(lo), float(hi)
