"""Anytime-valid sequential scoring: stop sampling a length once its verdict is known, with the error still ≤ α.

A *round* is one sample of every task at one length (sample index r of each task). Its mean is bounded in
[0, 1] and rounds are independent, so one confidence sequence per length covers the mean over tasks at every
round at once: P(the true mean ever leaves the interval) ≤ α, whatever rule decides when to stop looking.

The interval is the betting confidence sequence of Waudby-Smith & Ramdas (2023, JRSS-B), "hedged capital" with
predictable plug-in bets, the default of the `confseq` package (not a dependency: it ships as C++ source needing
Boost; tests/leaderboard/test_sequential.py checks this implementation against its published formula). For a
candidate mean m two bettors play: K⁺ bets that the mean is above m, K⁻ that it is below; where the hedged
capital max(½K⁺, ½K⁻) has ever reached 1/α, m is excluded (Ville's inequality bounds that chance by α under m).
K⁺ is decreasing and K⁻ increasing in m, so the excluded set is two tails and the interval is their gap,
found on a grid that always contains the rule's decision point: decisions are exact, endpoints conservative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ctxbench.harness.core.errors import ConfigError

RULER_THRESHOLD = 0.856  # Llama2-7B at 4K: RULER's bar for the effective length
GRID_POINTS = 2001  # candidate means on [0, 1] for a whole path (step 0.0005), plus the rule's decision point
COARSE_POINTS = 201  # one interval: a coarse grid, then the same again inside the two brackets (step 2.5e-5)
TRUNCATION = 0.5  # bets capped at c/m (c/(1-m)) so that capital never drops by more than half in one round
HEDGE = 0.5  # weight θ of the "above" bettor; 1-θ for the "below" bettor
TIME_BLOCK = 64  # rounds per block when scanning long sequences (bounds memory at block × grid × samples)

RuleKind = Literal["effective-length", "width", "vs"]
DECISIONS = ("above", "below", "narrow", "positive", "negative", "undecided")


@dataclass(frozen=True)
class StopRule:
    """When a length may stop: its score settled against a threshold, its interval narrow, or a sign settled."""

    kind: RuleKind
    alpha: float = 0.05
    threshold: float = RULER_THRESHOLD  # effective-length: a fraction in (0, 1)
    width: float | None = None  # width: stop when hi - lo < width (a fraction)
    looks: int = 1  # simultaneous sequences (lengths) the alpha is split over, Bonferroni: alpha/looks each

    def __post_init__(self) -> None:
        if self.kind not in ("effective-length", "width", "vs"):
            raise ConfigError(f"until: unknown rule {self.kind!r}; use effective-length, width=W or --vs RUN")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"alpha: {self.alpha} is not in (0, 1); use e.g. 0.05")
        if self.kind == "effective-length" and not 0 < self.threshold < 1:
            raise ConfigError(f"threshold: {self.threshold} is not a fraction in (0, 1); use e.g. 0.856")
        if self.kind == "width" and (self.width is None or not 0 < self.width <= 1):
            raise ConfigError(f"width: {self.width} is not a fraction in (0, 1]; use e.g. width=0.05")
        if self.looks < 1:
            raise ConfigError(f"looks: {self.looks} must be at least 1 (the number of lengths)")

    @property
    def alpha_each(self) -> float:
        """The level of each length's sequence: all of them hold at once with probability ≥ 1 - alpha."""
        return self.alpha / self.looks

    @property
    def bounds(self) -> tuple[float, float]:
        """The range of one round's value: a mean score in [0, 1], a paired difference in [-1, 1] for vs."""
        return (-1.0, 1.0) if self.kind == "vs" else (0.0, 1.0)

    @property
    def decision_point(self) -> float | None:
        """The value the rule compares the interval with (threshold, 0 for vs), in the values' own scale."""
        return {"effective-length": self.threshold, "vs": 0.0}.get(self.kind)


@dataclass(frozen=True)
class Verdict:
    settled: bool
    decision: str  # "above" | "below" | "narrow" | "positive" | "negative" | "undecided"
    lo: float  # anytime-valid interval for the mean at this round (for vs: the difference, in [-1, 1])
    hi: float
    rounds: int


def _vertex(means: np.ndarray, per_round: int) -> tuple[np.ndarray, np.ndarray]:
    """Rounds given by their mean of k samples in [0, 1], as the least favourable samples with that mean:
    support points (1, fraction, 0) with weights (ones, 1 if a fraction, zeros), shape (..., T, 3).

    log(1 + b(x - m)) is concave in x, so over samples in [0, 1] with a given sum the round's capital is lowest
    at a vertex of that set: floor(sum) ones, one fractional sample, zeros. Exact for 0/1 scores and k = 1."""
    total = np.round(means * per_round, 9)
    ones = np.minimum(np.floor(total), per_round)
    fraction = total - ones
    has_fraction = (fraction > 0).astype(float)
    points = np.stack([np.ones_like(means), fraction, np.zeros_like(means)], axis=-1)
    return points, np.stack([ones, has_fraction, per_round - ones - has_fraction], axis=-1)


def _rounds(values, per_round: int, lower: float, upper: float, *, batch: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rounds as (points, weights), shape (R, T, P), scaled to [0, 1]. A round is its mean over per_round
    samples, or the list of its samples' own values (then ties such as equal paired scores cost nothing)."""
    rows = values if batch else [values]
    if isinstance(rows, np.ndarray) or all(np.ndim(round_) == 0 for row in rows for round_ in row):
        array = np.clip((np.asarray(rows, dtype=float) - lower) / (upper - lower), 0.0, 1.0)
        return _vertex(array, per_round) if array.ndim == 2 else _support(array, np.ones_like(array))
    width = max((len(round_) for row in rows for round_ in row), default=1)
    points = np.zeros((len(rows), max(len(row) for row in rows), width))
    weights = np.zeros_like(points)
    for r, row in enumerate(rows):
        for t, round_ in enumerate(row):
            points[r, t, :len(round_)] = np.clip((np.asarray(round_, dtype=float) - lower) / (upper - lower), 0, 1)
            weights[r, t, :len(round_)] = 1.0
    return _support(points, weights)


def _support(points: np.ndarray, weights: np.ndarray, most: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Samples with few distinct values (0/1 scores, paired differences) as those values with counts per round:
    the same capital, at a fraction of the work of one term per task."""
    distinct, which = np.unique(points, return_inverse=True)
    if distinct.size > most:
        return points, weights
    which = which.reshape(points.shape)
    counts = np.stack([(weights * (which == j)).sum(axis=-1) for j in range(distinct.size)], axis=-1)
    return np.broadcast_to(distinct, counts.shape).copy(), counts


def _bets(points: np.ndarray, weights: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bets (WSR eq. 26) per sample, one per round: round t's bet uses only rounds before t."""
    seen = np.cumsum(weights.sum(axis=-1), axis=-1)
    mean_through = (0.5 + np.cumsum((weights * points).sum(axis=-1), axis=-1)) / (seen + 1)
    spread = (weights * (points - mean_through[..., None]) ** 2).sum(axis=-1)
    var_through = (0.25 + np.cumsum(spread, axis=-1)) / (seen + 1)
    var_before = np.concatenate([np.full(seen.shape[:-1] + (1,), 0.25), var_through[..., :-1]], axis=-1)
    return np.sqrt(2 * math.log(2 / alpha) / (np.maximum(seen, 1) * np.log1p(np.maximum(seen, 1)) * var_before))


def _capital_blocks(points: np.ndarray, weights: np.ndarray, alpha: float, grid: np.ndarray):
    """Yield (block_end, log K⁺, log K⁻) with shape (R, B, G): the hedged capitals' logs per round and candidate.

    Each round multiplies the capital by prod over its k samples of (1 ± b(x_i - m)) with one bet b: under the
    true mean μ its expectation prod(1 ± b(p_i - μ)) ≤ 1 by AM-GM, whatever the tasks' own p_i."""
    bets = _bets(points, weights, alpha)[..., None, None]
    m = grid[None, None, :, None]
    carry_plus = np.full((points.shape[0], 1, grid.size), math.log(HEDGE))
    carry_minus = np.full((points.shape[0], 1, grid.size), math.log(1 - HEDGE))
    with np.errstate(divide="ignore"):
        cap_plus, cap_minus = TRUNCATION / m, TRUNCATION / (1 - m)
    for start in range(0, points.shape[1], TIME_BLOCK):
        block = slice(start, start + TIME_BLOCK)
        x, w = points[:, block, None, :], weights[:, block, None, :]
        plus = carry_plus + np.cumsum((w * np.log1p(np.minimum(bets[:, block], cap_plus) * (x - m))).sum(-1), axis=1)
        minus = carry_minus + np.cumsum((w * np.log1p(-np.minimum(bets[:, block], cap_minus) * (x - m))).sum(-1), axis=1)
        carry_plus, carry_minus = plus[:, -1:], minus[:, -1:]
        yield start + plus.shape[1], plus, minus


def _grid(anchors: Sequence[float]) -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(0.0, 1.0, GRID_POINTS), np.asarray(anchors, dtype=float)]))


def _endpoints(excluded_low: np.ndarray, excluded_high: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lo = the highest excluded candidate of the low tail, hi = the lowest of the high tail (both excluded)."""
    low_count = excluded_low.sum(axis=-1)  # the low tail is a prefix of the grid, the high tail a suffix
    high_count = excluded_high.sum(axis=-1)
    lo = np.where(low_count > 0, grid[np.maximum(low_count - 1, 0)], 0.0)
    hi = np.where(high_count > 0, grid[np.minimum(grid.size - high_count, grid.size - 1)], 1.0)
    return lo, hi


def interval_path(values: Sequence, *, alpha: float, per_round: int = 1, lower: float = 0.0, upper: float = 1.0,
                  anchors: Sequence[float] = ()) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) after every round (running intersection), on a grid holding the anchors; rounds as in verdict()."""
    if not len(values):
        return np.zeros(0), np.zeros(0)
    points, weights = _rounds(values, per_round, lower, upper, batch=False)
    lo, hi = _path(points, weights, alpha, _grid([(a - lower) / (upper - lower) for a in anchors]))
    return lower + (upper - lower) * lo, lower + (upper - lower) * hi


def _path(points: np.ndarray, weights: np.ndarray, alpha: float, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    barrier = math.log(1 / alpha)
    los, his = [], []
    best_plus = np.full((1, 1, grid.size), -np.inf)
    best_minus = np.full((1, 1, grid.size), -np.inf)
    for _, plus, minus in _capital_blocks(points, weights, alpha, grid):
        best_plus = np.maximum.accumulate(np.concatenate([best_plus, plus], axis=1), axis=1)
        best_minus = np.maximum.accumulate(np.concatenate([best_minus, minus], axis=1), axis=1)
        lo, hi = _endpoints(best_plus[0, 1:] >= barrier, best_minus[0, 1:] >= barrier, grid)
        now_lo, now_hi = _endpoints(plus[0] >= barrier, minus[0] >= barrier, grid)  # this round's set alone
        empty = lo > hi  # the running intersection is empty: say this round's interval, never an inverted one
        lo, hi = np.where(empty, np.minimum(now_lo, now_hi), lo), np.where(empty, np.maximum(now_lo, now_hi), hi)
        los.append(lo)
        his.append(hi)
        best_plus, best_minus = best_plus[:, -1:], best_minus[:, -1:]
    return np.concatenate(los), np.concatenate(his)


def confidence_sequence(values: Sequence, *, alpha: float, lower: float = 0.0, upper: float = 1.0,
                        per_round: int = 1) -> tuple[float, float]:
    """Anytime-valid (1-alpha) interval for the mean of independent bounded values observed so far.

    A value is a round: a float, the mean of per_round independent samples in [lower, upper] (a round over k
    tasks: passing k narrows the interval to the samples' own spread, valid whatever the tasks' means), or the
    list of the round's sample values (tighter still when they are not 0/1, e.g. paired differences)."""
    return _scaled_interval(values, alpha=alpha, lower=lower, upper=upper, per_round=per_round, anchors=())


def _scaled_interval(values: Sequence, *, alpha: float, lower: float, upper: float, per_round: int,
                     anchors: Sequence[float]) -> tuple[float, float]:
    """The interval after the last round: a coarse grid, then a fine one inside the two brackets where it ends."""
    if not len(values):
        return lower, upper
    span = upper - lower
    points, weights = _rounds(values, per_round, lower, upper, batch=False)
    lo, hi = _last_interval(points, weights, alpha, [(a - lower) / span for a in anchors])
    return float(lower + span * lo), float(lower + span * hi)


def _last_interval(points: np.ndarray, weights: np.ndarray, alpha: float,
                   anchors01: Sequence[float]) -> tuple[float, float]:
    """The running intersection's ends. Where it is empty (every candidate excluded at some round: the data moved,
    or the sequence missed, an event of chance ≤ α) the last round's own interval, so lo ≤ hi always."""
    lo, hi = _interval_on_grids(points, weights, alpha, anchors01, ever=True)
    if lo > hi:
        lo, hi = _interval_on_grids(points, weights, alpha, anchors01, ever=False)
    return min(lo, hi), max(lo, hi)


def _interval_on_grids(points: np.ndarray, weights: np.ndarray, alpha: float, anchors01: Sequence[float], *,
                       ever: bool) -> tuple[float, float]:
    barrier = math.log(1 / alpha)
    coarse = np.unique(np.concatenate([np.linspace(0.0, 1.0, COARSE_POINTS), anchors01]))
    low, high = _excluded_ever(points, weights, alpha, coarse, barrier, ever=ever)
    fine = np.concatenate([_bracket(coarse, low.sum() - 1), _bracket(coarse, coarse.size - high.sum() - 1)])
    fine_low, fine_high = _excluded_ever(points, weights, alpha, fine, barrier, ever=ever)
    lo = max([0.0, *coarse[low], *fine[fine_low]])  # excluded tails are a prefix and a suffix of [0, 1]
    hi = min([1.0, *coarse[high], *fine[fine_high]])
    return lo, hi


def _bracket(grid: np.ndarray, index: int) -> np.ndarray:
    """Candidates between grid[index] and grid[index + 1], where one tail of the exclusions ends."""
    if index < 0 or index + 1 >= grid.size:
        return np.zeros(0)
    return np.linspace(grid[index], grid[index + 1], COARSE_POINTS)


def _excluded_ever(points: np.ndarray, weights: np.ndarray, alpha: float, grid: np.ndarray,
                   barrier: float, *, ever: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Which candidates the low and the high bettor have excluded at some round so far (running intersection), or
    (ever=False) at the last round."""
    best_plus, best_minus = np.full(grid.size, -np.inf), np.full(grid.size, -np.inf)
    if grid.size:
        for _, plus, minus in _capital_blocks(points, weights, alpha, grid):
            best_plus = np.maximum(best_plus, plus[0].max(axis=0)) if ever else plus[0, -1]
            best_minus = np.maximum(best_minus, minus[0].max(axis=0)) if ever else minus[0, -1]
    return best_plus >= barrier, best_minus >= barrier


def decide(rule: StopRule, lo: float, hi: float) -> str:
    """The rule's decision for an interval whose endpoints are excluded values ("undecided" if none)."""
    if rule.kind == "width":
        return "narrow" if hi - lo < rule.width else "undecided"
    point = rule.decision_point
    if lo >= point:
        return "above" if rule.kind == "effective-length" else "positive"
    if hi <= point:
        return "below" if rule.kind == "effective-length" else "negative"
    return "undecided"


def verdict(rule: StopRule, values: Sequence, *, per_round: int = 1) -> Verdict:
    """values: one per round (the round mean over tasks at one length; for vs, the round mean of paired
    differences in [-1, 1]). settled=True when the rule's decision is reached.

    per_round: the number of tasks averaged in each round. Pass it: the default 1 is valid but treats each
    round mean as one sample in [0, 1], which needs several times more rounds to settle. A round may instead be
    the list of its tasks' values (per_round is then their count): for vs, ties (both models right or both
    wrong) then cost nothing, where a mean cannot tell them from one win and one loss."""
    lower, upper = rule.bounds
    point = rule.decision_point
    lo, hi = _scaled_interval(values, alpha=rule.alpha_each, lower=lower, upper=upper, per_round=per_round,
                              anchors=() if point is None else (point,))
    decision = decide(rule, lo, hi) if len(values) else "undecided"
    return Verdict(settled=decision != "undecided", decision=decision, lo=lo, hi=hi, rounds=len(values))


def first_settled(rule: StopRule, rounds, *, per_round: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """For R sequences of rounds, shape (R, T) of round means or (R, T, k) of sample values: the round count at
    which each settles (T if it never does) and its decision. verdict()'s arithmetic, vectorised for simulation."""
    lower, upper = rule.bounds
    points, weights = _rounds(np.asarray(rounds, dtype=float), per_round, lower, upper, batch=True)
    count, length = points.shape[:2]
    if rule.kind == "width":
        return _first_narrow(rule, points, weights)
    point = np.array([(rule.decision_point - lower) / (upper - lower)])
    barrier = math.log(1 / rule.alpha_each)
    stop = np.full(count, length)
    decision = np.full(count, "undecided", dtype=object)
    for end, plus, minus in _capital_blocks(points, weights, rule.alpha_each, point):
        for crossed, side in ((plus[..., 0] >= barrier, "above"), (minus[..., 0] >= barrier, "below")):
            first = np.where(crossed.any(axis=1), crossed.argmax(axis=1) + end - crossed.shape[1] + 1, length + 1)
            take = (first <= length) & ((decision == "undecided") | (first < stop))
            stop = np.where(take, first, stop)
            decision = np.where(take, _renamed(rule, side), decision)
    return stop, decision


def _renamed(rule: StopRule, side: str) -> str:
    return side if rule.kind == "effective-length" else {"above": "positive", "below": "negative"}[side]


def _first_narrow(rule: StopRule, points: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first round whose interval is narrower than the rule's width: the running intersection only narrows,
    so a binary search over rounds finds it with verdict()'s own interval."""
    stops, decisions = [], []
    width = rule.width / (rule.bounds[1] - rule.bounds[0])
    for r in range(points.shape[0]):
        def narrow(t: int) -> bool:
            lo, hi = _last_interval(points[r:r + 1, :t], weights[r:r + 1, :t], rule.alpha_each, ())
            return hi - lo < width

        low, high = 1, points.shape[1]
        if not narrow(high):
            stops.append(high)
            decisions.append("undecided")
            continue
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if narrow(mid) else (mid + 1, high)
        stops.append(low)
        decisions.append("narrow")
    return np.array(stops), np.array(decisions, dtype=object)
