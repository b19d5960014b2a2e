"""Simulated studies that check the study statistics (leaderboard.studies): the false-positive rate under null
designs and the detection rate of an effect planted at the size the report states as detectable at 80% power.
Used by tests/leaderboard/test_studies.py (asserts) and benchmarks/study_calibration.py (prints the figures)."""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize
from scipy import stats as sps

from . import studies as st

CELLS, N = 3, 30  # task x length cells of a simulated study, samples per cell
NULLS = {
    "seed-dominated": dict(sd_seed=0.1, sd_sample=0.05, sd_noise=0.05),
    "balanced": dict(sd_seed=0.05),
    "no seed variance": dict(sd_seed=0.0),
    "binary scores": dict(sd_seed=0.02, binary=True),
    "vs one untrained run": dict(sd_seed=0.05, reference_seeds=1),
    "5 seeds": dict(seeds=5, reference_seeds=5, sd_seed=0.08),
}
POWER = {"3 vs 3 seeds": dict(sd_seed=0.05, reference_seeds=3), "3 vs 3, small seed variance": dict(sd_seed=0.02, reference_seeds=3),
         "3 seeds vs the untrained run": dict(sd_seed=0.05, reference_seeds=1)}


def rejections(reps: int, *, seed: int = 123, **design) -> tuple[float, float]:
    """Share of simulated studies whose 95% interval excludes 0 (two-sided), and share with lo > 0."""
    rng = np.random.default_rng(seed)
    two = up = 0
    for _ in range(reps):
        a, b, codes, n_cells, strata = st.simulate_arms(rng=rng, cells=CELLS, n=N, **design)
        d = st.compare_arms(a, b, codes, n_cells, strata, level=0.95, n_boot=400, rng=rng, exact=False)
        two += d.p < 0.05
        up += d.lo > 0
    return two / reps, up / reps


def design_se(*, seeds: int, reference_seeds: int, sd_seed: float, sd_sample: float = 0.1, sd_noise: float = 0.1):
    """SE and df of the estimate, from the simulation's own parameters (not from the estimator): Satterthwaite's, or
    against one fixed run the seed level's S − 1, which that comparison tests with (studies.SINGLE_SEED_METHOD)."""
    seed_parts = [sd_seed ** 2 / seeds] + ([sd_seed ** 2 / reference_seeds] if reference_seeds > 1 else [])
    dfs = [seeds - 1] + ([reference_seeds - 1] if reference_seeds > 1 else [])
    sample = (2 * sd_sample ** 2 + sd_noise ** 2 * (1 / seeds + 1 / reference_seeds)) / (CELLS * N)
    total = sum(seed_parts) + sample
    df = total ** 2 / (sum(v * v / f for v, f in zip(seed_parts, dfs)) + sample ** 2 / (CELLS * (N - 1)))
    return math.sqrt(total), (seeds - 1 if reference_seeds == 1 else df)


def effect_at_power(se: float, df: float, power: float = 0.8) -> float:
    """The effect a two-sided t-test (noncentral t, computed here independently of st.power_of) detects at `power`."""
    q = sps.t.ppf(0.975, df)
    return optimize.brentq(lambda e: sps.nct.sf(q, df, e / se) + sps.nct.cdf(-q, df, e / se) - power, 1e-9, 8 * se)
