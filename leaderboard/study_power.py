"""The power of a study comparison against one fixed run (an untrained model), stated beside its verdict.

Such a comparison is valid but weak: t on the seed level's S − 1 df (leaderboard/studies.py) holds its level
whatever the seed share, and with 3 seeds it has 2 df. A true +6.8-point gain was found 0.3% of the time in the
issue's design. The report therefore says what the design can detect and how many seeds would detect a given
difference (the observed one). `check` measures both by simulation (benchmarks/study_power.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from .studies import SINGLE_SEED_METHOD, Delta, compare_arms, power_of, simulate_arms


@dataclass(frozen=True)
class SingleRunPower:
    """How much a comparison against one fixed run (an untrained model) can see: the difference it detects with
    `power`, the power to detect a given difference, and the seeds that would detect that difference."""

    power: float
    detectable: float  # the smallest true |A − B| detected with `power` at the comparison's level
    target: float  # the given difference (the observed |Δ| unless one is asked for)
    power_at_target: float
    seeds_for_target: int | None  # seeds on the trained side for `power` at `target`; None: over MAX_SEEDS


MAX_SEEDS = 100


def _single_run_mdd(seed_var: float, sample_var: float, seeds: int, level: float, power: float) -> float:
    """The t test on the seed df (S − 1) against one fixed run: its detectable difference with S seeds, the
    per-seed variance and the sample level held fixed (more seeds shrink only the seed share)."""
    df = seeds - 1
    return float((sps.t.ppf(1 - (1 - level) / 2, df) + sps.t.ppf(power, df)) * math.sqrt(seed_var / seeds + sample_var))


def single_run_power(d: Delta, *, power: float = 0.8, target: float | None = None) -> SingleRunPower | None:
    """The power statement of a comparison decided by t on the seed df (seeds on one side only); None for other
    comparisons. From the per-seed variance (the seed level's variance times S), taken at its median-unbiased value
    s² (S − 1) / χ²₀.₅(S − 1): from 3 seeds the plain estimate falls below the truth in most studies (its median is
    0.69 of it), which made the stated power and seeds optimistic in simulation; and the sample level, which more
    seeds do not shrink. Checked against simulation in benchmarks/study_power.py and tests/leaderboard/test_study_power.py."""
    if d.method != SINGLE_SEED_METHOD:
        return None
    seeds = max(d.seeds)
    seed_var = d.var_seed * seeds * (seeds - 1) / float(sps.chi2.ppf(0.5, seeds - 1))  # median-unbiased: 2 df
    goal = abs(d.diff) if target is None else abs(target)
    needed = next((s for s in range(2, MAX_SEEDS + 1)
                   if goal > 0 and _single_run_mdd(seed_var, d.var_sample, s, d.level, power) <= goal), None)
    se = math.sqrt(seed_var / seeds + d.var_sample)
    at_target = power_of(goal, se, seeds - 1, alpha=1 - d.level) if se > 0 else math.nan
    return SingleRunPower(power, _single_run_mdd(seed_var, d.var_sample, seeds, d.level, power), goal, at_target,
                          needed)


def power_note(d: Delta, *, power: float = 0.8, unit: str = "points", scale: float = 100.0) -> str:
    """The power of a comparison against one run, in words ("" for other comparisons)."""
    p = single_run_power(d, power=power)
    if p is None:
        return ""
    digits = 2 if scale != 1 else 4
    seeds = max(d.seeds)
    more = (f"{p.seeds_for_target} seeds would detect it {power:.0%} of the time" if p.seeds_for_target
            else f"no number of seeds up to {MAX_SEEDS} would detect it {power:.0%} of the time (the sample level "
                 "alone is wider; score more samples)" if p.target > 0 else "")
    return (f"power: with {seeds} seeds against one {d.b} run this test detects a true difference of "
            f"{p.detectable * scale:.{digits}f} {unit} {power:.0%} of the time; a true difference as large as the "
            f"observed {p.target * scale:.{digits}f} {unit} {p.power_at_target:.0%} of the time" + (f"; {more}" if more else ""))


def _study(effect: float, seeds: int, rng: np.random.Generator, design: dict) -> Delta:
    a, b, codes, n_cells, strata = simulate_arms(effect=effect, seeds=seeds, reference_seeds=1, rng=rng, **design)
    return compare_arms(a, b, codes, n_cells, strata, level=0.95, n_boot=200, rng=rng, exact=False)


def _detected(effect: float, seeds: int, reps: int, rng: np.random.Generator, design: dict) -> float:
    return float(np.mean([_study(effect, seeds, rng, design).p < 0.05 for _ in range(reps)]))


def check(design: dict, *, effect: float, reps: int, seed: int = 0, power: float = 0.8, max_checked: int = 40) -> dict:
    """Simulated studies of `design` (simulate_arms' arguments) with 3 seeds against one run and `effect` planted:
    how often they detect it; the stated detectable difference (its median) and how often a study at that effect
    detects it; and the suggested seeds for `effect` and the power they reach (the mean over studies, each
    suggestion simulated at its own seed count; suggestions over `max_checked` seeds are counted, not run)."""
    rng = np.random.default_rng(seed)
    pilots = [_study(effect, 3, rng, design) for _ in range(reps)]
    stated = [single_run_power(d, power=power, target=effect) for d in pilots]
    mdd = float(np.median([p.detectable for p in stated]))
    seeds = [p.seeds_for_target for p in stated]
    runnable = sorted({k for k in seeds if k is not None and k <= max_checked})
    reached = {k: _detected(effect, k, max(50, reps // 4), rng, design) for k in runnable}
    achieved = [reached[k] for k in seeds if k in reached]
    return {"detected_with_3": float(np.mean([d.p < 0.05 for d in pilots])), "stated_mdd": mdd,
            "detected_at_stated_mdd": _detected(mdd, 3, reps, rng, design),
            "suggested_seeds": [float(np.percentile([k or 10 ** 6 for k in seeds], q)) for q in (25, 50, 75)],
            "power_at_suggested": float(np.mean(achieved)) if achieved else math.nan,
            "suggestions_checked": len(achieved) / reps}
