"""Fit a sample to a target token length: exact, and usually without tokenizing the whole prompt.

A task describes its prompt as a fixed part plus n haystack units, and gives an estimate of the tokens of n
units from exact token counts of its pieces (per-word costs of the essay, the cost of each line, document or
list item). The fixed part (template, question, needles) is measured on the sample's own short prompt, so
predicted(n) = count(short prompt) + estimate(n) - estimate(n_min).

What is guaranteed, by mode:

- verify="full": every accepted prompt was tokenized in full and has <= budget tokens, and one more unit would
  not fit by the local model (which is learned from the sample's own full counts: offset, then offset and scale).
- verify="fast": the prompt is built at the largest n whose prediction fits and is not tokenized
  in full, only when (1) the tokenizer is additive at every kind of boundary the task's prompts contain
  (checked once per tokenizer on sequences of real pieces, template edges included: core.additivity), and
  (2) the first sample of this task and length, tokenized in full, matched its prediction exactly. Then
  predicted(n) equals the full count, because the prompt is the short prompt plus pieces joined at additive
  boundaries. Otherwise the sample is verified as in "full". The guarantee thus rests on additivity, which is
  checked on probes of every boundary kind rather than proven for every string; a tokenizer that fails any
  probe is always verified in full.
- verify="auto" (suites' default): "fast" from FAST_PATH_MIN_SAMPLES samples per task and length, else "full". The
  additivity check costs tens of CPU-seconds per task on a cold cache; it pays off at RULER's 500 samples per cell,
  not at the handful of a quick suite, where tokenizing every prompt is cheaper and gives the same samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxbench.harness.core.errors import ConfigError

MODES = ("fast", "full")
FAST_PATH_MIN_SAMPLES = 32


def resolve_mode(verify: str, samples: int) -> str:
    """The mode a run uses: "auto" picks the fast path only where enough samples per cell amortise its check."""
    if verify == "auto":
        return "fast" if samples >= FAST_PATH_MIN_SAMPLES else "full"
    return check_mode(verify)


def check_mode(verify: str) -> str:
    """The verification mode; 'first' (the earlier name of the fast path) is accepted."""
    verify = {"first": "fast"}.get(verify, verify)
    if verify not in MODES:
        raise ConfigError(f"verify: use fast or full, got {verify!r}")
    return verify


@dataclass
class FitState:
    """Per task and length: whether predictions may be trusted, and counters."""

    verify: str = "fast"
    additive: bool = False  # the tokenizer passed the task's additivity probes
    exact: bool | None = None  # the first sample's full count equalled its prediction
    tokenizations: int = 0
    samples: int = 0

    @property
    def trusted(self) -> bool:
        return self.verify == "fast" and self.additive and bool(self.exact)


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


class _Local:
    """tokens ~ t0 + slope * (estimate - e0): anchored at the latest full count, slope from the last two."""

    def __init__(self):
        self.points: list[tuple[float, int]] = []

    def add(self, e: float, tokens: int) -> None:
        self.points.append((e, tokens))

    def __call__(self, e: float) -> float:
        e0, t0 = self.points[-1]
        slope = 1.0
        for e1, t1 in reversed(self.points[:-1]):
            if abs(e1 - e0) >= 1:
                slope = min(max((t0 - t1) / (e0 - e1), 0.5), 2.0)
                break
        return t0 + slope * (e - e0)


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
    base = (count_short or count)(build(min_units)[0]) - estimate(min_units)
    n = _largest(lambda k: base + estimate(k), budget, min_units, max_units)
    if state.trusted:
        text, extra = build(n)
        return Fitted(n, text, int(round(base + estimate(n))), extra)
    local = _Local()
    best: Fitted | None = None
    over: int | None = None  # smallest n known to overshoot
    for _ in range(24):
        text, extra = build(n)
        tokens = count(text)
        state.tokenizations += 1
        local.add(estimate(n), tokens)
        if tokens <= budget:
            if best is None or n > best.n:
                best = Fitted(n, text, tokens, extra)
            if n >= max_units or local(estimate(n + 1)) > budget:
                break  # one more unit would not fit
        else:
            over = n if over is None else min(over, n)
        lo = best.n + 1 if best is not None else min_units
        hi = over - 1 if over is not None else max_units
        if lo > hi:
            break
        n = min(max(_largest(lambda k: local(estimate(k)), budget, min_units, max_units), lo), hi)
    if best is None:
        raise ConfigError(f"length: {budget} tokens (after reserving generation) is too short for {what}; use a larger length")
    exact = best.tokens == round(base + estimate(best.n))
    state.exact = exact if state.exact is None else (state.exact and exact)
    return best
