"""Fit a sample to a target token length with about one full tokenization.

A task describes its prompt as a fixed part plus n haystack units, and gives a cheap estimate of
the tokens of n units, computed from pre-tokenized pieces (per-word counts of the essay, the cost
of one noise line, per-document counts...). We pick the largest n whose estimate fits, tokenize the
rendered prompt once, and accept if it fits and one more unit would not. The estimate's error is
learned (offset, then offset and scale) and carried to the next sample of the same task and length,
so most samples need exactly one tokenization. The budget is never exceeded: every accepted
prompt was tokenized in full.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxbench.harness.core.errors import ConfigError


@dataclass
class FitState:
    """Per task and length: counters, and whether the piece-count estimate proved exact.

    verify="full" tokenizes every accepted prompt (the guarantee rests on a real count).
    verify="first" tokenizes the first sample in full; if its count equals the estimate exactly,
    later samples trust the estimate and skip the full tokenization (about 0 per sample).
    """

    verify: str = "full"
    exact: bool | None = None
    tokenizations: int = 0
    samples: int = 0


@dataclass(frozen=True)
class Fitted:
    n: int
    text: Any  # whatever build() returned: a Rendered prompt
    tokens: int
    extra: Any


def _largest(pred: Callable[[int], float], limit: float, lo: int, hi: int) -> int:
    """Largest n in [lo, hi] with pred(n) <= limit (pred is non-decreasing); lo if none."""
    if pred(hi) <= limit:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pred(mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_units(
    *,
    budget: int,
    build: Callable[[int], tuple[Any, Any]],
    estimate: Callable[[int], float],
    count: Callable[[Any], int],
    state: FitState,
    count_short: Callable[[Any], int] | None = None,
    max_units: int,
    min_units: int = 0,
    what: str = "task",
) -> Fitted:
    """Largest n in [min_units, max_units] whose rendered prompt has <= budget tokens.

    Everything depends only on this sample, so the result does not depend on generation order.
    """
    state.samples += 1
    # The fixed part (template, question, needles) is measured on this sample's own short prompt,
    # so the only estimate left is the haystack's, which comes from exact per-piece counts.
    offset = base = (count_short or count)(build(min_units)[0]) - estimate(min_units)
    n = _largest(lambda k: offset + estimate(k), budget, min_units, max_units)
    if state.verify == "first" and state.exact:
        text, extra = build(n)
        return Fitted(n, text, int(round(offset + estimate(n))), extra)
    best: Fitted | None = None
    over: int | None = None  # smallest n known to overshoot
    for _ in range(16):
        text, extra = build(n)
        tokens = count(text)
        state.tokenizations += 1
        offset = tokens - estimate(n)
        if tokens <= budget:
            if best is None or n > best.n:
                best = Fitted(n, text, tokens, extra)
            if n >= max_units or offset + estimate(n + 1) > budget:
                break  # one more unit would not fit
        else:
            over = n if over is None else min(over, n)
        lo = best.n + 1 if best is not None else min_units
        hi = over - 1 if over is not None else max_units
        if lo > hi:
            break
        n = min(max(_largest(lambda k: offset + estimate(k), budget, min_units, max_units), lo), hi)
    if best is None:
        raise ConfigError(f"length: {budget} tokens (after reserving generation) is too short for {what}; use a larger length")
    exact = best.tokens == round(base + estimate(best.n))
    state.exact = exact if state.exact is None else (state.exact and exact)
    return best
