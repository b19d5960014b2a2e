"""What a run will cost before it runs: expected samples to settle each length, and the power of a comparison.

The expected rounds come from simulating the same rule the run will use (harness/core/stats/sequential.py) on rounds of
k tasks that all score the length's expected mean: a spread of accuracies across tasks only makes round means
less variable, so this is the slower case. The power figures are the fixed-N paired comparison of two models at
one length (normal approximation, two-sided): pairing by sample id can only lower the variance assumed here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ctxbench.harness.core.stats.sequential import StopRule, first_settled

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


def tasks_per_length(cells: dict[int, list[int]]) -> dict[int, int]:
    """How many tasks a round has at each length (a task may list its own lengths)."""
    return {length: len(counts) for length, counts in cells.items()}


@functools.cache
def _cached_rounds(rule: StopRule, mean: float, tasks: int, samples: int) -> Expected:
    return expected_rounds(rule, mean, tasks=tasks, samples=samples)


def _worst_inside(rule: StopRule) -> float:
    """The score (points) a rule takes longest to settle: at the threshold, or at 50 for a width."""
    return 100 * rule.threshold if rule.kind == "effective-length" else 50.0


def _target_rows(rule: StopRule, cases: list[Case], speed: dict[int, float] | None, mean_seconds: float | None
                 ) -> list[dict]:
    """Expected samples per case at its expected score, and their range over the score's interval: planned at the
    interval's ends and, when the interval holds it, at the score the rule settles slowest (the cost is not
    monotone in the score)."""
    rows = []
    for c in cases:
        at = {c.points, c.lo, c.hi} | ({_worst_inside(rule)} if c.lo < _worst_inside(rule) < c.hi else set())
        counts = {p: _cached_rounds(rule, p / 100, c.tasks, c.cap) for p in at}
        per_sample = (speed or {}).get(c.length, mean_seconds) if (speed or mean_seconds) else None
        expected = counts[c.points]
        samples = [min(round(e.rounds * c.tasks), c.full) for e in counts.values()]
        count = min(round(expected.rounds * c.tasks), c.full)
        rows.append({"length": c.length, "score": c.points, "score_lo": c.lo, "score_hi": c.hi, "tasks": c.tasks,
                     "samples": count, "samples_lo": min(samples), "samples_hi": max(samples),
                     "settled_before_n": expected.settled_share, "full_samples": c.full,
                     "seconds": count * per_sample if per_sample else None,
                     "seconds_hi": max(samples) * per_sample if per_sample else None,
                     "full_seconds": c.full * per_sample if per_sample else None})
    return rows


@dataclass(frozen=True)
class Case:
    """One row of a plan: a length (None: a hypothetical score), its expected score and interval (points), its
    tasks per round, the rounds' cap (the most samples a task has there) and its full-protocol samples."""

    length: int | None
    points: float
    lo: float
    hi: float
    tasks: int
    cap: int
    full: int


def _cases(cells: dict[int, list[int]], expected: dict[int, tuple[float, float, float]]) -> list[Case]:
    if expected:
        return [Case(n, *expected[n], len(cells[n]), max(cells[n]), sum(cells[n])) for n in sorted(expected)]
    widest = max(cells, key=lambda n: (len(cells[n]), sum(cells[n])))
    return [Case(None, p, p, p, len(cells[widest]), max(cells[widest]), sum(cells[widest])) for p in HYPOTHETICAL]


def build_plan(suite, *, cells: dict[int, list[int]], seconds: dict[int, float] | None,
               expected: dict[int, tuple[float, float, float]], threshold: float, width: float | None, alpha: float,
               n: int | None, detect: float | None, power: float) -> dict:
    """The plan as data: per target (effective length, width) the expected samples per length (with their range
    over each expected score's interval) or per hypothetical score beside the full protocol's, and the
    comparison's detectable difference and needed N. `cells` holds each length's samples per task, as `score`
    plans them; `seconds` the time per sample at each length."""
    counts = tasks_per_length(cells)
    full = sum(sum(v) for v in cells.values())
    full_seconds = sum(sum(v) * seconds[length] for length, v in cells.items()) if seconds else None
    mean_seconds = full_seconds / full if full_seconds is not None and full else None
    looks = len(counts)
    cases = _cases(cells, expected)
    rules = [("effective-length", StopRule("effective-length", alpha=alpha, threshold=threshold / 100, looks=looks))]
    if width is not None:
        rules.append((f"width={width:g}", StopRule("width", alpha=alpha, width=width / 100, looks=looks)))
    targets = []
    for name, rule in rules:
        rows = _target_rows(rule, cases, seconds, mean_seconds)
        unknown = [length for length in cells if length not in expected] if expected else []
        unscored = sum(sum(cells[length]) for length in unknown)
        unscored_seconds = sum(sum(cells[n]) * seconds[n] for n in unknown) if seconds else 0.0
        total = sum(r["samples"] for r in rows) + unscored if expected else None
        total_hi = sum(r["samples_hi"] for r in rows) + unscored if expected else None
        targets.append({"target": name, "rows": rows, "total_samples": total, "total_samples_lo":
                        sum(r["samples_lo"] for r in rows) + unscored if expected else None,
                        "total_samples_hi": total_hi, "unscored_samples": unscored,
                        "total_seconds": sum(r["seconds"] for r in rows) + unscored_seconds
                        if seconds and expected else None,
                        "total_seconds_hi": sum(r["seconds_hi"] for r in rows) + unscored_seconds
                        if seconds and expected else None})
    mean = sum(e[0] for e in expected.values()) / len(expected) / 100 if expected else 0.5
    return {"suite": suite.name, "samples": suite.samples, "samples_per_task": sorted({x for v in cells.values() for x in v}),
            "tasks_per_length": {str(k): v for k, v in counts.items()}, "full_samples": full,
            "full_seconds": full_seconds, "samples_per_second": 1 / mean_seconds if mean_seconds else None,
            "targets": targets, "compare": _compare(cells, mean, alpha=alpha, n=n, detect=detect, power=power, looks=looks)}


def _compare(cells: dict[int, list[int]], mean: float, *, alpha: float, n: int | None, detect: float | None,
             power: float, looks: int) -> dict:
    """The fixed-N paired comparison at one length (the widest) and over all lengths, and the N to detect `detect`."""
    per_length = max(len(v) for v in cells.values())
    tasks = sum(len(v) for v in cells.values())
    at = n or min(x for v in cells.values() for x in v)
    compare = {"n": at, "tasks": per_length, "power": power, "alpha": alpha, "mean": mean,
               "detectable_one_length": 100 * detectable_difference(at, per_length, mean=mean, alpha=alpha, power=power),
               "detectable_all_lengths": 100 * detectable_difference(at, tasks, mean=mean, alpha=alpha, power=power)}
    if detect is not None:
        cap = max(x for v in cells.values() for x in v)
        needed = samples_to_detect(detect / 100, per_length, mean=mean, alpha=alpha, power=power)
        vs = expected_vs_rounds(StopRule("vs", alpha=alpha, looks=looks), mean, detect / 100, tasks=per_length,
                                samples=max(needed, cap))
        compare.update({"detect": detect, "samples_to_detect": needed, "vs_rounds": round(vs.rounds),
                        "vs_settled": vs.settled_share, "vs_cap": max(needed, cap)})
    return compare
