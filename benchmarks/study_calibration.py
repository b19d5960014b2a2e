"""Calibration of the study statistics (issue 12 §6) on simulated studies, as figures for a closing note:
the false-positive rate of the hierarchical comparison under null designs (nominal 0.05), and how often the
interval excludes 0 when an effect is planted at the size the report states as detectable at 80% power.

    python benchmarks/study_calibration.py [--reps 1000]

The designs are those of tests/leaderboard/test_studies.py (3 cells x 30 samples, 3 seeds), which asserts
FPR within 0.03-0.07 and detection within 0.80 +/- 0.07; this prints the numbers themselves.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import optimize
from scipy import stats as sps

from ctxbench.leaderboard import studies as st

CELLS, N = 3, 30
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


def rejections(reps: int, *, seed: int, **design) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    two = up = 0
    for _ in range(reps):
        a, b, codes, n_cells, strata = st.simulate_arms(rng=rng, cells=CELLS, n=N, **design)
        d = st.compare_arms(a, b, codes, n_cells, strata, level=0.95, n_boot=400, rng=rng, exact=False)
        two += d.p < 0.05
        up += d.lo > 0
    return two / reps, up / reps


def design_se(*, seeds: int, reference_seeds: int, sd_seed: float, sd_sample: float = 0.1, sd_noise: float = 0.1):
    """SE and Satterthwaite df of the estimate, from the simulation's parameters (not from the estimator)."""
    seed_parts = [sd_seed ** 2 / seeds] + ([sd_seed ** 2 / reference_seeds] if reference_seeds > 1 else [])
    dfs = [seeds - 1] + ([reference_seeds - 1] if reference_seeds > 1 else [])
    sample = (2 * sd_sample ** 2 + sd_noise ** 2 * (1 / seeds + 1 / reference_seeds)) / (CELLS * N)
    total = sum(seed_parts) + sample
    df = total ** 2 / (sum(v * v / f for v, f in zip(seed_parts, dfs)) + sample ** 2 / (CELLS * (N - 1)))
    return math.sqrt(total), df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000, help="simulated studies per design")
    reps = ap.parse_args().reps
    print(f"null designs ({reps} simulated studies each, 3 cells x {N} samples): false-positive rate at nominal 0.05")
    for name, design in NULLS.items():
        fpr, _ = rejections(reps, seed=123, **design)
        half = 1.96 * math.sqrt(0.05 * 0.95 / reps)
        print(f"  {name:<28} {fpr:.3f}   (binomial 95% band around 0.05: {0.05 - half:.3f}-{0.05 + half:.3f})")
    print(f"planted effect at the stated 80% power ({reps} studies each): share whose interval excludes 0 (lo > 0)")
    for name, design in POWER.items():
        se, df = design_se(seeds=3, **design)
        q = sps.t.ppf(0.975, df)
        effect = optimize.brentq(lambda e: sps.nct.sf(q, df, e / se) + sps.nct.cdf(-q, df, e / se) - 0.8, 1e-9, 8 * se)
        _, detected = rejections(reps, seed=7, effect=effect, **design)
        print(f"  {name:<28} effect {effect:.4f} (SE {se:.4f}, df {df:.1f}): detected {detected:.3f}  "
              f"(report's power_of: {st.power_of(effect, se, df):.3f})")


if __name__ == "__main__":
    main()
