"""Coverage of the AUC@L interval (leaderboard/auc.py) on an independent simulator.

The simulator imports nothing from ctxbench but the function under test: per (task, length) cells with their own
true mean and sample count, 0/1 or continuous (a point mass at 1 beside a beta) scores, and in one design haystacks
shared by several samples of a cell (clusters: a beta-distributed accuracy per haystack). The truth is the same
weighted sum of the cells' TRUE means, with the trapezoid weights of the score curve up to L; a replicate covers
when the interval holds it.

    python benchmarks/auc_coverage.py --reps 4000            # the table in docs/statistics.md (AUC section)

tests/leaderboard/test_auc.py runs the same designs at fewer replicates in the slow tier.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
from scipy import stats

LENGTHS = tuple(8192 * 2 ** i for i in range(8))  # 8K .. 1M


@dataclass(frozen=True)
class Design:
    name: str
    kind: str  # "binary", "continuous" or "clustered"
    tasks: int
    n_range: tuple[int, int]  # samples per cell, drawn once per design
    top: float  # true mean at the shortest length
    bottom: float  # at the longest
    upto: int


DESIGNS = (
    Design("0/1, 4 tasks, n 10-60 per cell, 97% -> 30%", "binary", 4, (10, 60), 0.97, 0.30, 1024 ** 2),
    Design("0/1, 4 tasks, n 10-60 per cell, to 128K", "binary", 4, (10, 60), 0.97, 0.30, 128 * 1024),
    Design("0/1, saturated short lengths (100% .. 99%), n 20", "binary", 3, (20, 20), 1.0, 0.9, 1024 ** 2),
    Design("0/1, 2 tasks, n 5 per cell", "binary", 2, (5, 5), 0.9, 0.2, 1024 ** 2),
    Design("continuous, mass at 1, 3 tasks, n 10-30", "continuous", 3, (10, 30), 0.95, 0.4, 1024 ** 2),
    Design("continuous, near 1, 3 tasks, n 4-8", "continuous", 3, (4, 8), 0.99, 0.85, 128 * 1024),
    Design("0/1 in haystacks of 5 (clusters), 3 tasks, n 20-40", "clustered", 3, (20, 40), 0.95, 0.4, 1024 ** 2),
    Design("0/1, the same 6 documents of a task at every length (shared clusters)", "shared", 3, (30, 30), 0.95, 0.4,
           1024 ** 2),
)


def _true_means(design: Design, rng: np.random.Generator) -> np.ndarray:
    """(tasks, lengths) true means: falling with log length, tasks apart by a random offset."""
    frac = np.linspace(0, 1, len(LENGTHS))
    base = design.top + (design.bottom - design.top) * frac
    offsets = rng.uniform(-0.08, 0.08, size=(design.tasks, 1)) * (base < 1.0)
    return np.clip(base[None, :] + offsets, 0.0, 1.0)


def _draw(kind: str, mu: float, n: int, rng: np.random.Generator, cell: int = 0,
          shared: np.ndarray | None = None) -> tuple[np.ndarray, list | None]:
    if kind == "binary":
        return (rng.random(n) < mu).astype(float), None
    if kind == "continuous":  # a share at exactly 1, the rest beta with the mean that makes the total mu
        ones = rng.random(n) < 0.6 * mu
        rest_mean = (mu - 0.6 * mu) / (1 - 0.6 * mu)
        rest_mean = min(max(rest_mean, 1e-3), 1 - 1e-3)
        return np.where(ones, 1.0, rng.beta(4 * rest_mean, 4 * (1 - rest_mean), size=n)), None
    kappa = 8.0  # haystack accuracies ~ Beta(mean mu, concentration kappa)
    a, b = max(mu * kappa, 1e-3), max((1 - mu) * kappa, 1e-3)
    if shared is not None:  # one uniform per document, the same at every length: accuracies move together
        groups = shared.size
        p = stats.beta.ppf(shared, a, b) if mu < 1 else np.ones(groups)
        ids = np.arange(n) % groups
        return (rng.random(n) < p[ids]).astype(float), [f"doc{cell}-{i}" for i in ids]
    groups = -(-n // 5)
    p = rng.beta(a, b, size=groups) if mu < 1 else np.ones(groups)
    ids = np.repeat(np.arange(groups), 5)[:n]
    return (rng.random(n) < p[ids]).astype(float), [f"c{cell}h{i}" for i in ids]  # haystack ids unique to the cell


def coverage(design: Design, reps: int, *, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """(share of intervals holding the truth, mean width in points)."""
    from ctxbench.leaderboard.auc import auc_weights, weighted_interval

    rng = np.random.default_rng(seed)
    mu = _true_means(design, rng)
    sizes = rng.integers(design.n_range[0], design.n_range[1] + 1, size=mu.shape)
    w_len = auc_weights(LENGTHS, design.upto)
    used = np.flatnonzero(w_len > 0)
    weights = np.array([w_len[j] / design.tasks for j in used for _ in range(design.tasks)])
    truth = float(sum(w_len[j] * mu[:, j].mean() for j in used))
    hits, widths = 0, []
    for _ in range(reps):
        cells, clusters = [], []
        docs = rng.random((design.tasks, 6))
        for j in used:
            for t in range(design.tasks):
                kind = "clustered" if design.kind == "shared" else design.kind
                values, ids = _draw(kind, float(mu[t, j]), int(sizes[t, j]), rng, cell=len(cells) if kind != "shared"
                                    and design.kind != "shared" else t, shared=docs[t] if design.kind == "shared" else None)
                cells.append(values)
                clusters.append(ids)
        iv = weighted_interval(cells, weights, level=level, clusters=clusters)
        hits += bool(iv.lo <= truth + 1e-12 and truth <= iv.hi + 1e-12)
        widths.append(iv.hi - iv.lo)
    return hits / reps, 100 * float(np.nanmean(widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    args = parser.parse_args()
    print(f"| design | L | coverage (nominal 0.95, {args.reps} replicates) | mean width (points) |")
    print("|---|---|---|---|")
    for i, design in enumerate(DESIGNS):
        cov, width = coverage(design, args.reps, seed=i)
        label = "128K" if design.upto == 128 * 1024 else "1M"
        print(f"| {design.name} | {label} | {cov:.3f} | {width:.1f} |", flush=True)


if __name__ == "__main__":
    main()
