"""What a run will cost before it runs: expected samples to settle each length, and the power of a comparison.

The expected rounds come from simulating the same rule the run will use (leaderboard/sequential.py) on rounds of
k tasks that all score the length's expected mean: a spread of accuracies across tasks only makes round means
less variable, so this is the slower case. The power figures are the fixed-N paired comparison of two models at
one length (normal approximation, two-sided): pairing by sample id can only lower the variance assumed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ctxbench.leaderboard.sequential import StopRule, first_settled

PLAN_REPS = 200  # simulated runs per estimate (threshold and sign rules are vectorised)
WIDTH_REPS = 8  # the width rule searches interval by interval: fewer runs, its stopping round varies little
HYPOTHETICAL = (50.0, 70.0, 80.0, 84.0, 88.0, 90.0, 95.0, 99.0)  # scores (points) planned when none is expected


@dataclass(frozen=True)
class Expected:
    """Simulated cost of one length under a rule: mean rounds to stop (N where it never settles)."""

    rounds: float
    settled_share: float  # the share of simulated runs that settle before N


def expected_rounds(rule: StopRule, mean: float, *, tasks: int, samples: int, seed: int = 0) -> Expected:
    """Expected rounds for a length whose tasks score `mean` (a fraction) on average, capped at `samples`."""
    rng = np.random.default_rng(seed)
    reps = WIDTH_REPS if rule.kind == "width" else PLAN_REPS
    rounds = rng.binomial(tasks, min(max(mean, 0.0), 1.0), (reps, samples)) / tasks
    stop, decision = first_settled(rule, rounds, per_round=tasks)
    return Expected(float(stop.mean()), float((decision != "undecided").mean()))


def expected_vs_rounds(rule: StopRule, mean: float, difference: float, *, tasks: int, samples: int,
                       seed: int = 0) -> Expected:
    """Expected rounds for --vs to settle the sign of a true difference between two models at one length."""
    rng = np.random.default_rng(seed)
    low, high = _pair(mean, difference)
    ours = rng.random((PLAN_REPS, samples, tasks)) < high
    theirs = rng.random((PLAN_REPS, samples, tasks)) < low
    stop, decision = first_settled(rule, ours.astype(float) - theirs)  # per-task differences, as the runner keeps
    return Expected(float(stop.mean()), float((decision != "undecided").mean()))


def _pair(mean: float, difference: float) -> tuple[float, float]:
    """Two accuracies `difference` apart around `mean`, both inside [0, 1]."""
    low = min(max(mean - difference / 2, 0.0), 1.0 - difference)
    return low, low + difference


def _pair_sd(mean: float, difference: float) -> float:
    """sd of one paired difference of 0/1 scores, taking no credit for the pairing (floored at 1% accuracy)."""
    low, high = (min(max(p, 0.01), 0.99) for p in _pair(mean, difference))
    return math.sqrt(low * (1 - low) + high * (1 - high))


def _z_sum(alpha: float, power: float) -> float:
    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


def detectable_difference(samples: int, tasks: int, *, mean: float = 0.5, alpha: float = 0.05,
                          power: float = 0.8) -> float:
    """The smallest true difference (a fraction) a paired test at level alpha finds with the given power, from
    `samples` per task on `tasks` tasks."""
    difference = 0.0
    for _ in range(20):  # the sd depends on the difference: a fixed point, reached in a few steps
        difference = min(_z_sum(alpha, power) * _pair_sd(mean, difference) / math.sqrt(samples * tasks), 1.0)
    return difference


def samples_to_detect(difference: float, tasks: int, *, mean: float = 0.5, alpha: float = 0.05,
                      power: float = 0.8) -> int:
    """Samples per task needed to detect `difference` (a fraction) with the given power."""
    return math.ceil((_z_sum(alpha, power) * _pair_sd(mean, difference) / difference) ** 2 / tasks)


def tasks_per_length(suite) -> dict[int, int]:
    """How many tasks a round has at each of the suite's lengths (a task may list its own lengths)."""
    counts: dict[int, int] = {}
    for spec in suite.tasks:
        for length in spec.lengths or suite.lengths:
            counts[length] = counts.get(length, 0) + 1
    return counts


def _target_rows(rule: StopRule, cases: list[tuple[int | None, float, int]], samples: int,
                 speed: float | None) -> list[dict]:
    rows = []
    for length, points, tasks in cases:
        expected = expected_rounds(rule, points / 100, tasks=tasks, samples=samples)
        count = expected.rounds * tasks
        rows.append({"length": length, "score": points, "tasks": tasks, "samples": round(count),
                     "settled_before_n": expected.settled_share, "full_samples": samples * tasks,
                     "seconds": count / speed if speed else None})
    return rows


def build_plan(suite, *, speed: float | None, expected: dict[int, float], threshold: float, width: float | None,
               alpha: float, n: int | None, detect: float | None, power: float) -> dict:
    """The plan as data: per target (effective length, width) the expected samples per length or per
    hypothetical score beside the full protocol's, and the comparison's detectable difference and needed N."""
    counts = tasks_per_length(suite)
    samples = suite.samples
    full = sum(counts.values()) * samples
    looks = len(counts)
    if expected:
        cases = [(length, expected[length], counts[length]) for length in sorted(expected)]
    else:
        cases = [(None, points, max(counts.values())) for points in HYPOTHETICAL]
    rules = [("effective-length", StopRule("effective-length", alpha=alpha, threshold=threshold / 100, looks=looks))]
    if width is not None:
        rules.append((f"width={width:g}", StopRule("width", alpha=alpha, width=width / 100, looks=looks)))
    targets = []
    for name, rule in rules:
        rows = _target_rows(rule, cases, samples, speed)
        unknown = sum(counts[length] for length in counts if length not in expected) * samples if expected else 0
        total = sum(r["samples"] for r in rows) + unknown if expected else None
        targets.append({"target": name, "rows": rows, "total_samples": total, "unscored_samples": unknown,
                        "total_seconds": total / speed if speed and total is not None else None})
    mean = sum(expected.values()) / len(expected) / 100 if expected else 0.5
    per_length = max(counts.values())
    at = n or samples
    compare = {"n": at, "tasks": per_length, "power": power, "alpha": alpha, "mean": mean,
               "detectable_one_length": 100 * detectable_difference(at, per_length, mean=mean, alpha=alpha, power=power),
               "detectable_all_lengths": 100 * detectable_difference(at, sum(counts.values()), mean=mean, alpha=alpha,
                                                                     power=power)}
    if detect is not None:
        needed = samples_to_detect(detect / 100, per_length, mean=mean, alpha=alpha, power=power)
        vs = expected_vs_rounds(StopRule("vs", alpha=alpha, looks=looks), mean, detect / 100, tasks=per_length,
                                samples=max(needed, samples))
        compare.update({"detect": detect, "samples_to_detect": needed, "vs_rounds": round(vs.rounds),
                        "vs_settled": vs.settled_share, "vs_cap": max(needed, samples)})
    return {"suite": suite.name, "samples": samples, "tasks_per_length": {str(k): v for k, v in counts.items()},
            "full_samples": full, "full_seconds": full / speed if speed else None, "samples_per_second": speed,
            "targets": targets, "compare": compare}
