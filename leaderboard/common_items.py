"""Common items: two models scored on different subsets (another N, a sequential run's prefix, a failed sample)
are compared on the samples both have. The paired test (aggregate.paired_comparison) already pairs on
(task, length, seed, index); this module shows each model's score on those common items beside its score on all
of its own, per length, and says how many items each side had alone, so a reader sees what the subsets changed.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .aggregate import PAIR_KEY, PairedComparison
from .frame import format_length, normalise
from .render import Section, Table
from .tables import pct

COLUMNS = ["length", "common", "only_a", "only_b", "a_common", "b_common", "a_all", "b_all"]


def _per_sample(df: pd.DataFrame, model: str) -> pd.Series:
    rows = df[(df["model"] == model) & (df["source"] == "measured")]
    return rows.groupby(PAIR_KEY)["score"].mean()


def _task_mean(scores: pd.Series) -> float:
    """Mean of the task means (tasks weigh equally, as the board's averages and the paired test)."""
    return float(scores.groupby(level="task").mean().mean()) if len(scores) else float("nan")


def _at(items: pd.Series | pd.Index, length: int | None):
    """The items at one length (None: all)."""
    if length is None:
        return items
    index = items if isinstance(items, pd.Index) else items.index
    return items[index.get_level_values("length") == length]


def common_items(df: pd.DataFrame, model_a: str, model_b: str) -> pd.DataFrame:
    """Per length and overall: items both models scored, items only one did, and each model's
    score on the common items and on all its items (0..1); the last row (length None) is all lengths."""
    df = normalise(df)
    a, b = _per_sample(df, model_a), _per_sample(df, model_b)
    both = a.index.intersection(b.index)
    rows = []
    lengths = sorted(set(a.index.get_level_values("length")) | set(b.index.get_level_values("length")))
    for length in [*lengths, None]:
        a_l, b_l, both_l = _at(a, length), _at(b, length), _at(both, length)
        rows.append((length, len(both_l), len(a_l.index.difference(both_l)), len(b_l.index.difference(both_l)),
                     _task_mean(a_l.loc[both_l]), _task_mean(b_l.loc[both_l]), _task_mean(a_l), _task_mean(b_l)))
    return pd.DataFrame(rows, columns=COLUMNS)


def common_items_section(df: pd.DataFrame, comp: PairedComparison) -> Section:
    """The comparison's items: how many both models have, and each model's score on them and on all of its own."""
    frame = common_items(df, comp.model_a, comp.model_b)
    a, b = comp.model_a, comp.model_b
    rows = tuple((format_length(int(r.length)) if pd.notna(r.length) else "all", str(r.common), str(r.only_a), str(r.only_b),
                  pct(r.a_common), pct(r.b_common), pct(r.a_all), pct(r.b_all)) for r in frame.itertuples(index=False))
    table = Table(headers=("Length", "Common items", f"Only {a}", f"Only {b}", f"{a} on common", f"{b} on common",
                           f"{a} on all its items", f"{b} on all its items"), rows=rows)
    total = frame.iloc[-1]
    return Section(title=f"Common items: {a} vs {b}", tables=(table,), notes=(
        f"The paired comparison above uses the {int(total.common)} items both models scored (matched on task, length, "
        f"seed and index); {int(total.only_a)} scored only by {a} and {int(total.only_b)} only by {b} (another N, a "
        "sequential prefix, a failed sample) are left out of it. Scores: mean of task means, percent.",))


def with_common_items(sections: list[Section], df: pd.DataFrame, compared: Sequence[PairedComparison]) -> list[Section]:
    """`sections` with each paired comparison's common-items section right after it."""
    out = []
    by_title = {f"Paired comparison: {c.model_a} vs {c.model_b}": c for c in compared}
    for section in sections:
        out.append(section)
        if section.title in by_title:
            out.append(common_items_section(df, by_title[section.title]))
    return out
