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
TIME_BLOCK = 256  # rounds per block when scanning long sequences (bounds memory at blocks × grid)

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


def _vertex(x: np.ndarray, per_round: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A round's k samples as the least favourable ones with its mean: (ones, fraction, has_fraction, zeros).

    log(1 + b(x - m)) is concave in x, so over samples in [0, 1] with a given sum the round's capital is lowest
    at a vertex: floor(sum) ones, one fractional sample, zeros. Exact for 0/1 scores and for per_round=1."""
    total = np.round(x * per_round, 9)
    ones = np.minimum(np.floor(total), per_round)
    fraction = total - ones
    has_fraction = (fraction > 0).astype(float)
    return ones, fraction, has_fraction, per_round - ones - has_fraction


def _bets(x: np.ndarray, alpha: float, per_round: int) -> np.ndarray:
    """Predictable plug-in bets (WSR eq. 26) per sample, one per round: round t's bet uses only rounds before t."""
    ones, fraction, has_fraction, zeros = _vertex(x, per_round)
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    seen = t * per_round
    mean_through = (0.5 + np.cumsum(x * per_round, axis=-1)) / (seen + 1)
    spread = ones * (1 - mean_through) ** 2 + has_fraction * (fraction - mean_through) ** 2 + zeros * mean_through ** 2
    var_through = (0.25 + np.cumsum(spread, axis=-1)) / (seen + 1)
    var_before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), var_through[..., :-1]], axis=-1)
    return np.sqrt(2 * math.log(2 / alpha) / (seen * np.log1p(seen) * var_before))


def _capital_blocks(x: np.ndarray, alpha: float, grid: np.ndarray, per_round: int):
    """Yield (block_end, log K⁺, log K⁻) with shape (R, B, G): the hedged capitals' logs per round and candidate.

    Each round multiplies the capital by prod over its k samples of (1 ± b(x_i - m)) with one bet b: under the
    true mean μ its expectation prod(1 ± b(p_i - μ)) ≤ 1 by AM-GM, whatever the tasks' own p_i."""
    bets = _bets(x, alpha, per_round)[..., None]
    ones, fraction, has_fraction, zeros = (part[..., None] for part in _vertex(x, per_round))
    m = grid[None, None, :]
    carry_plus = np.full((x.shape[0], 1, grid.size), math.log(HEDGE))
    carry_minus = np.full((x.shape[0], 1, grid.size), math.log(1 - HEDGE))
    with np.errstate(divide="ignore"):
        cap_plus, cap_minus = TRUNCATION / m, TRUNCATION / (1 - m)
    for start in range(0, x.shape[1], TIME_BLOCK):
        block = slice(start, start + TIME_BLOCK)
        b_plus, b_minus = np.minimum(bets[:, block], cap_plus), -np.minimum(bets[:, block], cap_minus)
        plus = carry_plus + np.cumsum(_log_factor(b_plus, m, ones[:, block], fraction[:, block],
                                                  has_fraction[:, block], zeros[:, block]), axis=1)
        minus = carry_minus + np.cumsum(_log_factor(b_minus, m, ones[:, block], fraction[:, block],
                                                    has_fraction[:, block], zeros[:, block]), axis=1)
        carry_plus, carry_minus = plus[:, -1:], minus[:, -1:]
        yield start + plus.shape[1], plus, minus


def _log_factor(bet, m, ones, fraction, has_fraction, zeros) -> np.ndarray:
    """log of one round's capital factor at the vertex: sum over samples of log(1 + bet (x - m))."""
    return ones * np.log1p(bet * (1 - m)) + has_fraction * np.log1p(bet * (fraction - m)) + zeros * np.log1p(-bet * m)


def _grid(anchors: Sequence[float]) -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(0.0, 1.0, GRID_POINTS), np.asarray(anchors, dtype=float)]))


def _endpoints(excluded_low: np.ndarray, excluded_high: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lo = the highest excluded candidate of the low tail, hi = the lowest of the high tail (both excluded)."""
    low_count = excluded_low.sum(axis=-1)  # the low tail is a prefix of the grid, the high tail a suffix
    high_count = excluded_high.sum(axis=-1)
    lo = np.where(low_count > 0, grid[np.maximum(low_count - 1, 0)], 0.0)
    hi = np.where(high_count > 0, grid[np.minimum(grid.size - high_count, grid.size - 1)], 1.0)
    return lo, hi


def interval_path(values01: Sequence[float] | np.ndarray, *, alpha: float, per_round: int = 1,
                  anchors: Sequence[float] = ()) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) after every round, running intersection, for round means in [0, 1] of per_round samples each;
    anchors are put on the grid."""
    x = np.clip(np.asarray(values01, dtype=float), 0.0, 1.0)[None, :]
    grid, barrier = _grid(anchors), math.log(1 / alpha)
    los, his = [], []
    best_plus = np.full((1, 1, grid.size), -np.inf)
    best_minus = np.full((1, 1, grid.size), -np.inf)
    for _, plus, minus in _capital_blocks(x, alpha, grid, per_round):
        best_plus = np.maximum.accumulate(np.concatenate([best_plus, plus], axis=1), axis=1)
        best_minus = np.maximum.accumulate(np.concatenate([best_minus, minus], axis=1), axis=1)
        lo, hi = _endpoints(best_plus[0, 1:] >= barrier, best_minus[0, 1:] >= barrier, grid)
        los.append(lo)
        his.append(hi)
        best_plus, best_minus = best_plus[:, -1:], best_minus[:, -1:]
    if not los:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(los), np.concatenate(his)


def confidence_sequence(values: Sequence[float], *, alpha: float, lower: float = 0.0, upper: float = 1.0,
                        per_round: int = 1) -> tuple[float, float]:
    """Anytime-valid (1-alpha) interval for the mean of independent bounded values observed so far.

    per_round: each value is the mean of that many independent samples in [lower, upper] (a round over k
    tasks); passing k narrows the interval to the samples' own spread, valid whatever the tasks' means."""
    return _scaled_interval(values, alpha=alpha, lower=lower, upper=upper, per_round=per_round, anchors=())


def _scaled_interval(values: Sequence[float], *, alpha: float, lower: float, upper: float, per_round: int,
                     anchors: Sequence[float]) -> tuple[float, float]:
    if not len(values):
        return lower, upper
    span = upper - lower
    x = np.clip((np.asarray(values, dtype=float) - lower) / span, 0.0, 1.0)[None, :]
    barrier = math.log(1 / alpha)
    coarse = np.unique(np.concatenate([np.linspace(0.0, 1.0, COARSE_POINTS), [(a - lower) / span for a in anchors]]))
    low, high = _excluded_ever(x, alpha, coarse, per_round, barrier)
    fine = np.concatenate([_bracket(coarse, low.sum() - 1), _bracket(coarse, coarse.size - high.sum() - 1)])
    fine_low, fine_high = _excluded_ever(x, alpha, fine, per_round, barrier)
    lo = max([0.0, *coarse[low], *fine[fine_low]])  # excluded tails are a prefix and a suffix of [0, 1]
    hi = min([1.0, *coarse[high], *fine[fine_high]])
    return float(lower + span * lo), float(lower + span * hi)


def _bracket(grid: np.ndarray, index: int) -> np.ndarray:
    """Candidates between grid[index] and grid[index + 1], where one tail of the exclusions ends."""
    if index < 0 or index + 1 >= grid.size:
        return np.zeros(0)
    return np.linspace(grid[index], grid[index + 1], COARSE_POINTS)


def _excluded_ever(x: np.ndarray, alpha: float, grid: np.ndarray, per_round: int,
                   barrier: float) -> tuple[np.ndarray, np.ndarray]:
    """Which candidates the low and the high bettor have excluded at some round so far (running intersection)."""
    best_plus, best_minus = np.full(grid.size, -np.inf), np.full(grid.size, -np.inf)
    for _, plus, minus in _capital_blocks(x, alpha, grid, per_round):
        best_plus = np.maximum(best_plus, plus[0].max(axis=0))
        best_minus = np.maximum(best_minus, minus[0].max(axis=0))
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


def verdict(rule: StopRule, values: Sequence[float], *, per_round: int = 1) -> Verdict:
    """values: one per round (the round mean over tasks at one length; for vs, the round mean of paired
    differences in [-1, 1]). settled=True when the rule's decision is reached.

    per_round: the number of tasks averaged in each round. Pass it: the default 1 is valid but treats each
    round mean as one sample in [0, 1], which needs several times more rounds to settle."""
    lower, upper = rule.bounds
    point = rule.decision_point
    lo, hi = _scaled_interval(values, alpha=rule.alpha_each, lower=lower, upper=upper, per_round=per_round,
                              anchors=() if point is None else (point,))
    decision = decide(rule, lo, hi) if len(values) else "undecided"
    return Verdict(settled=decision != "undecided", decision=decision, lo=lo, hi=hi, rounds=len(values))


def first_settled(rule: StopRule, rounds: np.ndarray, *, per_round: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """For R sequences of round values, shape (R, T): the round count at which each settles (T if it never
    does) and its decision. The same arithmetic as verdict(), vectorised over sequences for simulation."""
    values = np.atleast_2d(np.asarray(rounds, dtype=float))
    count, length = values.shape
    if rule.kind == "width":
        return _first_narrow(rule, values, per_round)
    lower, upper = rule.bounds
    x = np.clip((values - lower) / (upper - lower), 0.0, 1.0)
    point = np.array([(rule.decision_point - lower) / (upper - lower)])
    barrier = math.log(1 / rule.alpha_each)
    stop = np.full(count, length)
    decision = np.full(count, "undecided", dtype=object)
    for end, plus, minus in _capital_blocks(x, rule.alpha_each, point, per_round):
        for crossed, name in ((plus[..., 0] >= barrier, "above"), (minus[..., 0] >= barrier, "below")):
            first = np.where(crossed.any(axis=1), crossed.argmax(axis=1) + end - crossed.shape[1] + 1, length + 1)
            better = (decision == "undecided") | (first < stop)
            take = better & (first <= length) & ((decision == "undecided") | (first < stop))
            stop = np.where(take, first, stop)
            decision = np.where(take, _renamed(rule, name), decision)
    return stop, decision


def _renamed(rule: StopRule, side: str) -> str:
    return side if rule.kind == "effective-length" else {"above": "positive", "below": "negative"}[side]


def _first_narrow(rule: StopRule, values: np.ndarray, per_round: int) -> tuple[np.ndarray, np.ndarray]:
    stops, decisions = [], []
    for row in values:
        lo, hi = interval_path(np.clip(row, 0.0, 1.0), alpha=rule.alpha_each, per_round=per_round)
        narrow = (hi - lo) < rule.width
        stops.append(int(narrow.argmax()) + 1 if narrow.any() else row.size)
        decisions.append("narrow" if narrow.any() else "undecided")
    return np.array(stops), np.array(decisions, dtype=object)
