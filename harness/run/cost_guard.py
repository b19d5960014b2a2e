"""The spending ceiling of a scoring run: the tokens and money the plan expects, said before it starts, refused over
`--max-cost` / `--max-tokens`, and held against real use after every batch.

The ceiling is for the whole run, not this invocation: what the rows already in the store spent (every line, an
errored attempt's too: it was paid) counts towards it, and the plan's estimate covers only the samples still to
score. A rerun with a higher ceiling continues where the last one stopped; nothing finished is scored again.

The estimate is an upper bound: each pending sample at its length's prompt tokens (a prompt is built to fit its
length) and its whole generation budget (the task's answer budget plus any thinking budget), no prompt tokens from a
cache. Tokens for `--max-tokens` are prompt plus generated tokens. With `--until`, the run may stop far earlier than
its full protocol: the full protocol's estimate is printed as its bound, `--max-cost` is refused only below what
the rows already spent, and the mid-run ceiling stops it (`ctxbench plan` gives the expected `--until` share).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prices import Price, PriceTable
from ctxbench.harness.core.rows import Row


class CeilingReached(KeyboardInterrupt):
    """Real spending reached --max-cost or --max-tokens: the run stops as an interrupt does (the rows so far kept, a
    rerun resumes); a KeyboardInterrupt so that no `except Exception` turns it into an error row."""


@dataclass(frozen=True)
class Ceiling:
    max_cost: float | None = None  # USD, the whole run
    max_tokens: int | None = None  # prompt + generated tokens, the whole run


def parse_ceiling(max_cost: float | None, max_tokens: str | int | None) -> Ceiling:
    """--max-cost USD and --max-tokens N (2M, 500k allowed); one line naming the flag when a value is wrong."""
    from ctxbench.harness.core.lengths import parse_length

    if max_cost is not None and not (math.isfinite(max_cost) and max_cost >= 0):
        raise ConfigError(f"--max-cost: a non-negative amount in USD, got {max_cost!r}")
    tokens = None
    if max_tokens is not None:
        try:
            tokens = parse_length(max_tokens)
        except (ValueError, ConfigError):
            tokens = -1
        if tokens < 0:
            raise ConfigError(f"--max-tokens: a number of tokens (e.g. 2M, 500k), got {max_tokens!r}")
    return Ceiling(max_cost, tokens)


@dataclass(frozen=True)
class TokenEstimate:
    """Tokens of the samples still to score, at most: prompt (input) and generation budget (output)."""

    samples: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def cost(self, price: Price | None) -> float | None:
        return None if price is None else price.cost(self.input_tokens, 0, self.output_tokens)


def estimate_tokens(cells: Iterable[Any], done: Iterable[str] = (), thinking_budget: int = 0) -> TokenEstimate:
    """The pending samples' tokens: `length` prompt tokens and the task's answer budget (+ thinking) each."""
    done = set(done)
    samples = inputs = outputs = 0
    for c in cells:
        pending = sum(1 for j in c.ids() if j not in done)
        budget = int(getattr(c.task, "max_new_tokens", 0) or 0) + int(thinking_budget)
        samples += pending
        inputs += pending * int(c.length)
        outputs += pending * budget
    return TokenEstimate(samples, inputs, outputs)


@dataclass
class Spend:
    """Real use of a run (the store's rows, then each batch's), priced, against its ceiling. One per run."""

    model: str
    price: Price | None
    ceiling: Ceiling = Ceiling()
    cost: float = 0.0
    tokens: int = 0
    rows: int = 0
    history: dict[str, float] = field(default_factory=dict)

    def priced(self, rows: list[Row]) -> list[Row]:
        """The rows with their `cost_usd` (None without a price), added to the run's spend."""
        out = []
        for r in rows:
            cost = None if self.price is None else round(self.price.cost(r.prompt_tokens, r.cached_tokens, r.generated_tokens), 8)
            out.append(replace(r, cost_usd=cost))
        self.add(out)
        return out

    def add(self, rows: Iterable[Row | Mapping[str, Any]]) -> None:
        for r in rows:
            get = r.get if isinstance(r, Mapping) else (lambda k, _r=r: getattr(_r, k, None))
            prompt, generated = int(get("prompt_tokens") or 0), int(get("generated_tokens") or 0)
            self.tokens += prompt + generated
            self.rows += 1
            if self.price is not None:
                self.cost += self.price.cost(prompt, get("cached_tokens"), generated)

    def reached(self) -> str | None:
        if self.ceiling.max_cost is not None and self.price is not None and self.cost >= self.ceiling.max_cost:
            return f"--max-cost reached: ${self.cost:,.4f} of ${self.ceiling.max_cost:,.4f}"
        if self.ceiling.max_tokens is not None and self.tokens >= self.ceiling.max_tokens:
            return f"--max-tokens reached: {self.tokens:,} of {self.ceiling.max_tokens:,} tokens"
        return None

    def check(self) -> None:
        """Stop before the next backend call once the run's real spending has reached its ceiling."""
        reached = self.reached()
        if reached:
            print(f"{reached} (the whole run, {self.rows:,} rows); the run stops here: rerun with a higher ceiling to "
                  "continue", file=sys.stderr)
            raise CeilingReached(reached)


def check_ceiling(model: str, prices: PriceTable, ceiling: Ceiling, estimate: TokenEstimate, spent: Spend,
                  sequential: bool = False) -> None:
    """Refuse, before anything is written, a ceiling the plan's estimate (plus what the run already spent) exceeds;
    a money ceiling for a model without a price."""
    if not estimate.samples:
        return  # nothing left to score: a finished run's table needs no ceiling
    if ceiling.max_cost is not None and spent.price is None:
        raise ConfigError(f"--max-cost: no price for {model} in {prices.path or 'the price table'}; add it or use --max-tokens")
    bound = 0 if sequential else 1  # --until: only what is already spent refuses; the mid-run ceiling does the rest
    cost = spent.cost + bound * (estimate.cost(spent.price) or 0.0)
    what = "the run has spent" if sequential else "the plan's estimate is"
    if ceiling.max_cost is not None and cost > ceiling.max_cost:
        to_go = "" if sequential else f" (${spent.cost:,.4f} spent, up to ${cost - spent.cost:,.4f} to go)"
        raise ConfigError(f"--max-cost: {what} ${cost:,.4f}{to_go} > ${ceiling.max_cost:,.4f}; raise --max-cost, or "
                          "score fewer samples (--samples, --lengths, --until)")
    tokens = spent.tokens + bound * estimate.tokens
    if ceiling.max_tokens is not None and tokens > ceiling.max_tokens:
        to_go = "" if sequential else f" ({spent.tokens:,} spent)"
        raise ConfigError(f"--max-tokens: {what} {tokens:,} tokens{to_go} > {ceiling.max_tokens:,}; raise --max-tokens, "
                          "or score fewer samples (--samples, --lengths, --until)")


def estimate_line(model: str, estimate: TokenEstimate, spent: Spend, sequential: bool = False) -> str:
    """The plan's tokens and cost, as score prints it before the run."""
    scope = "full protocol, the bound of --until" if sequential else "samples to score"
    money = (f"; at most ${estimate.cost(spent.price):,.4f} at {spent.price.line()}" if spent.price is not None
             else f"; no price for {model} (tokens only)")
    done = f"; spent so far ${spent.cost:,.4f}, {spent.tokens:,} tokens" if spent.rows and spent.price else \
        f"; spent so far {spent.tokens:,} tokens" if spent.rows else ""
    return (f"tokens ({scope}): {estimate.samples:,} samples, ~{estimate.input_tokens:,} prompt + at most "
            f"{estimate.output_tokens:,} generated{money}{done}")


@dataclass(frozen=True)
class CostPlan:
    """What prepare hands the run: the estimate of the samples to score and the run's one meter."""

    estimate: TokenEstimate
    spend: Spend
    sequential: bool = False

    def line(self) -> str:
        return estimate_line(self.spend.model, self.estimate, self.spend, self.sequential)


def plan_cost(*, name: str, prices: PriceTable | None, ceiling: Ceiling | None, cells: list[Any], done: Iterable[str],
              store: Any, fresh: bool, thinking_budget: int, sequential: bool) -> CostPlan:
    """The run's estimate and meter (priced by `name`, its board name), its store's rows counted when resuming;
    refused over the ceiling (check_ceiling). Reads the store, writes nothing."""
    if prices is None:
        from ctxbench.harness.core.prices import load_prices

        prices = load_prices()  # the shipped examples (configs/prices.yaml)
    table = prices
    spend = Spend(name, table.price_for(name), ceiling or Ceiling())
    if not fresh and store.has_rows():
        spend.add(store.rows())
    estimate = estimate_tokens(cells, done, thinking_budget)
    check_ceiling(name, table, spend.ceiling, estimate, spend, sequential)
    return CostPlan(estimate, spend, sequential)
