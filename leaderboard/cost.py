"""What each model's scores cost: tokens (prompt, cached, generated, reasoning), money and GPU-seconds per model.

The store frame sums each cell's token account (`cell_tokens`, from the rows the board reads: the last row of each
sample) into the cells' COST_COLUMNS; `cost_section` turns them into one row per model. A row written before row
version 3 has no token account (`token_source` ""): it counts in `unrecorded`, never as 0 tokens; a row without a
price has `cost_usd` None and counts in `unpriced`, never as $0 (docs/cost-and-scale.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pandas as pd

from .render import Section, Table

COST_COLUMNS = ["prompt_tokens", "cached_tokens", "generated_tokens", "reasoning_total", "cost_usd", "gpu_seconds",
                "accounted", "unrecorded", "unpriced"]
# accounted: rows with a token account (row version 3); unrecorded: rows without one; unpriced: accounted rows
# without a price.
OPTIONAL = ("cached_tokens", "reasoning_total", "cost_usd", "gpu_seconds")  # NaN where no row of the cell has one
NO_TOKENS = tuple(math.nan if c in OPTIONAL else 0 for c in COST_COLUMNS)  # a cell with no stored row (all pending)


def cell_tokens(units: dict) -> dict[tuple, tuple]:
    """Per cell (model, task, length): its rows' token account summed, in COST_COLUMNS order."""
    sums: dict[tuple, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(COST_COLUMNS, 0) | dict.fromkeys(OPTIONAL, math.nan))
    for _, row, info in units.values():
        s = sums[(info["model"], row.get("task"), int(row.get("length") or 0))]
        if not row.get("token_source"):
            s["unrecorded"] += 1
            continue
        s["accounted"] += 1
        s["prompt_tokens"] += int(row.get("prompt_tokens") or 0)
        s["generated_tokens"] += int(row.get("generated_tokens") or 0)
        for key, column in (("cached_tokens", "cached_tokens"), ("reasoning_tokens", "reasoning_total"),
                            ("cost_usd", "cost_usd"), ("gpu_seconds", "gpu_seconds")):
            if row.get(key) is not None:  # None: the backend did not report it (NaN in the cell), never 0
                s[column] = (0.0 if math.isnan(s[column]) else s[column]) + float(row[key])
        s["unpriced"] += row.get("cost_usd") is None
    return {cell: tuple(s[c] for c in COST_COLUMNS) for cell, s in sums.items()}


def per_model(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells' token account summed per model (min_count=1: a model none of whose rows has a cost stays NaN)."""
    if cells is None or cells.empty or "accounted" not in cells:
        return pd.DataFrame(columns=["model", *COST_COLUMNS])
    return cells.groupby("model", sort=True)[COST_COLUMNS].sum(min_count=1).reset_index()


def _share(part: float, whole: float) -> str:
    return f" ({part / whole:.0%})" if whole else ""


def _row(r: Any) -> tuple[str, ...]:
    if not r.accounted:
        return (str(r.model), "not recorded", "", "", "", "", "")
    prompt, generated = int(r.prompt_tokens), int(r.generated_tokens)
    cost = "no price" if math.isnan(r.cost_usd) else f"${r.cost_usd:,.4f}" + (f" ({int(r.unpriced)} rows unpriced)"
                                                                             if r.unpriced else "")
    gpu = "" if math.isnan(r.gpu_seconds) else f"{r.gpu_seconds:,.1f}"
    unrecorded = f"{int(r.unrecorded)} rows not recorded" if r.unrecorded else ""
    return (str(r.model), f"{prompt:,}", _part(r.cached_tokens, prompt), f"{generated:,}",
            _part(r.reasoning_total, generated), cost, gpu + unrecorded)


def _part(part: float, whole: int) -> str:
    """A part of a token count with its share; "not reported" where no row had it (never 0)."""
    return "not reported" if math.isnan(part) else f"{int(part):,}{_share(part, whole)}"


def cost_table(cells: pd.DataFrame | None) -> Table | None:
    """One row per model: tokens, the cached share of the prompt, the reasoning share of the generated tokens, cost
    and GPU-seconds. None when no stored row has a token account."""
    models = per_model(cells)
    if models.empty or not models["accounted"].fillna(0).any():
        return None
    rows = tuple(_row(r) for r in models.itertuples())
    return Table(headers=("Model", "Prompt tokens", "Cached (of prompt)", "Generated tokens", "Reasoning (of generated)",
                          "Cost (USD)", "GPU-seconds"), rows=rows)


def cost_section(cells: pd.DataFrame | None) -> Section | None:
    """The board's "Tokens and cost" section (None when no run recorded tokens)."""
    table = cost_table(cells)
    if table is None:
        return None
    return Section(title="Tokens and cost", tables=(table,), notes=(
        "Summed over the rows the board reads (the last row of each sample). Tokens are the server's where it reported "
        "usage, else counted; reasoning tokens are part of the generated ones. Cost is priced at run time by the "
        "run's price table (configs/prices.yaml or --prices; each price dated): 'no price' where the model had none, "
        "never $0. GPU-seconds: the GPU backends' device time times devices. See docs/cost-and-scale.md.",))
