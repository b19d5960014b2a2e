"""Price tables: what a model's tokens cost, per million input, cached-input and output tokens.

A price is a fact only with its date: every entry names the day it was read (`as_of`) and where (`source`), and a
table is user-editable YAML (configs/prices.yaml ships dated examples to check; `--prices PATH` reads another).
A model without an entry has no price: its runs count tokens only and its rows' `cost_usd` is None, never 0.

    prices:
      - model: gpt-4o-mini          # a run's model name, or a pattern (fnmatch: gpt-4o-mini-*, echo(*))
        input: 0.15                 # USD per million prompt tokens not served from a cache
        cached_input: 0.075         # USD per million prompt tokens a cache served (default: the input price)
        output: 0.60                # USD per million generated tokens (reasoning included)
        as_of: 2025-06-01
        source: https://openai.com/api/pricing/

The first entry whose `model` matches wins, an exact name before any pattern.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxbench.harness.core.config import CONFIG_ROOT, read_yaml_mapping, validate_config

DEFAULT_PRICES = CONFIG_ROOT / "prices.yaml"
MILLION = 1_000_000


class Price(BaseModel):
    """One model's (or pattern's) prices in USD per million tokens, with the day they were read and where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="the model's name as a run names it, or an fnmatch pattern")
    input: float = Field(ge=0, description="USD per million prompt tokens not served from a cache")
    cached_input: float | None = Field(None, ge=0, description="USD per million cached prompt tokens (default: input)")
    output: float = Field(ge=0, description="USD per million generated tokens, reasoning included")
    as_of: dt.date = Field(description="the day the price was read (a price without a date is no fact)")
    source: str = Field(min_length=1, description="where it was read (a URL)")

    @field_validator("source")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("https://", "http://")):
            raise ValueError("must be the URL the price was read from (https://...)")
        return v

    def cost(self, prompt_tokens: int, cached_tokens: int | None, output_tokens: int) -> float:
        """USD for one row's tokens: cached prompt tokens at the cached price, the rest at the input price."""
        cached = min(max(int(cached_tokens or 0), 0), int(prompt_tokens))
        cached_price = self.input if self.cached_input is None else self.cached_input
        return ((int(prompt_tokens) - cached) * self.input + cached * cached_price + int(output_tokens) * self.output) / MILLION

    def line(self) -> str:
        cached = "" if self.cached_input is None else f", ${self.cached_input:g} cached"
        return f"${self.input:g} in{cached}, ${self.output:g} out per 1M tokens (as of {self.as_of}, {self.source})"


class PriceTable(BaseModel):
    """A price table file: its entries in order (the first match wins), and where it was read from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prices: tuple[Price, ...] = ()
    path: str = ""

    def price_for(self, model: str) -> Price | None:
        """The entry naming `model` exactly, else the first pattern matching it, else None (no price)."""
        exact = next((p for p in self.prices if p.model == model), None)
        return exact or next((p for p in self.prices if fnmatch.fnmatchcase(model, p.model)), None)


def load_prices(path: Path | str | None = None, *, field: str = "--prices") -> PriceTable:
    """The price table at `path` (default: the shipped configs/prices.yaml); a bad entry is one line naming its
    key and the fix."""
    where = Path(path) if path is not None else DEFAULT_PRICES
    if path is None and not where.is_file():
        return PriceTable()  # an install without the shipped examples: no prices, tokens only
    raw = read_yaml_mapping(where, field=field, expect="a `prices:` list of entries (model, input, output, as_of, source)")
    if not isinstance(raw.get("prices", []), list):
        from ctxbench.harness.core.errors import ConfigError

        raise ConfigError(f"{where.name}: prices: must be a list of entries (model, input, output, as_of, source)")
    raw = {k: v for k, v in raw.items() if k != "note"}  # a table may say what it is in a `note:`
    return validate_config(PriceTable, {**raw, "path": str(where)}, where=where.name)
