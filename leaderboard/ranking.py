"""Threshold grading (effective length) and RULER's weighted-average ranking.

These work on the per-(model, length) frame from
:func:`leaderboard.aggregate.length_averages` (scores on 0..1); thresholds
are given in percent (0..100) because that is how papers publish them.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

import numpy as np
import pandas as pd

from ctxbench.harness.core import registry

from .frame import parse_length

Rule = Literal["contiguous", "max"]

NO_THRESHOLD = "no threshold for these tasks"
THRESHOLD_OF_REPORTED_AVERAGES = "ruler"  # a paper's own averages ("reported"): graded as published (RULER Table 3)


def _family(task: str) -> str:
    return re.split(r"[/:]", task, maxsplit=1)[0].lower()


def task_threshold(task: str) -> str | None:
    """The effective-length threshold a task declared when it registered (register("task", NAME,
    effective_length="ruler")), or None. A name the registry does not have (a paper's per-task row, a task of an
    older ctxbench) takes its family's where every registered task of the family declares the same one; a name of
    no registered family (an uninstalled plugin's) has none: a threshold set on another scale says nothing about it."""
    declared = {name: registry.declared("task", name, "effective_length") for name in registry.names("task")}
    if task in declared:
        return declared[task]
    family = {value for name, value in declared.items() if _family(name) == _family(task)}
    return family.pop() if len(family) == 1 else None


def has_threshold(task_set_key: str) -> bool:
    """Whether RULER's effective-length threshold applies to a task set (its tasks, comma-joined; "reported" for a
    paper's own averages, whose tasks the board cannot see): every task in it declared it (task_threshold)."""
    tasks = [t for t in str(task_set_key).split(",") if t]
    return all((THRESHOLD_OF_REPORTED_AVERAGES if t == "reported" else task_threshold(t)) == "ruler" for t in tasks)


def withheld_reason(group: pd.DataFrame) -> str:
    """Why a model's headline is withheld (its length_averages rows carry it), "" when it is not."""
    return str(group["headline"].iat[0] or "") if "headline" in group and len(group) else ""


def resolve_threshold(avgs: pd.DataFrame, spec: float | int | str) -> float:
    """Turn a threshold spec into a percentage.

    ``spec`` is a number in 0..100, or a reference to a measured/reported
    score: ``"model=Llama2 (7B)@4096"`` (RULER's choice: Llama-2-7B at 4K) or
    ``"run=<run_id>@4K"``. The name is everything between ``=`` and the last
    ``@``, so names may contain ``=`` or ``@`` themselves.
    """
    if isinstance(spec, (int, float, np.integer, np.floating)) and not isinstance(spec, bool):
        value = float(spec)
    else:
        text = str(spec).strip()
        try:
            value = float(text)
        except ValueError:
            return _reference_threshold(avgs, text)
    if not 0 <= value <= 100:
        raise ValueError(f"threshold must be a percentage in 0..100, got {value}")
    return value


def _reference_threshold(avgs: pd.DataFrame, text: str) -> float:
    kind, sep, rest = text.partition("=")
    name, at, length_text = rest.rpartition("@")
    kind = kind.strip()
    if not sep or not at or kind not in ("model", "run") or not name:
        raise ValueError(
            f"threshold {text!r}: expected a number or 'model=NAME@LENGTH' / 'run=RUN_ID@LENGTH'"
        )
    try:
        length = parse_length(length_text)
    except ValueError:
        raise ValueError(f"threshold {text!r}: bad length {length_text!r}") from None
    if kind == "model":
        rows = avgs[avgs["model"] == name]
    else:
        rows = avgs[avgs["run_ids"].fillna("").str.split(",").apply(lambda ids: name in ids)]
    if rows.empty:
        raise ValueError(f"threshold {text!r}: no {kind} named {name!r}")
    at_length = rows[rows["length"] == length]
    if at_length.empty:
        have = ", ".join(str(x) for x in sorted(rows["length"].unique()))
        raise ValueError(
            f"threshold {text!r}: {kind} {name!r} has no score at {length} (has {have})"
        )
    return float(at_length["mean"].mean() * 100)


def _above(pct: np.ndarray, threshold: float) -> np.ndarray:
    """Strictly above; values equal up to float noise (85.6 vs 0.856*100) do not pass."""
    return (pct > threshold) & ~np.isclose(pct, threshold, rtol=0, atol=1e-9)


def _graded_length(lengths: np.ndarray, passes: np.ndarray, rule: Rule) -> int | None:
    if rule == "max":
        return int(lengths[passes].max()) if passes.any() else None
    if not passes[0]:
        return None
    failures = np.flatnonzero(~passes)
    return int(lengths[-1] if failures.size == 0 else lengths[failures[0] - 1])


def _lower_bounds(group: pd.DataFrame, rule: Rule) -> np.ndarray:
    """The per-length lower ends CI lower grades. Under "max" one length falsely above the threshold anywhere past
    the true effective length is enough to overstate it, so α is spent over the lengths (Bonferroni: ``lo_spent``,
    aggregate.length_averages); a max of per-length bounds overstated it 6-8% of the time on flat curves. Under
    "contiguous" only the first length truly below can, so the per-length bound holds its level as it is."""
    if rule == "max" and "lo_spent" in group:
        return group["lo_spent"].to_numpy(dtype=float)
    return group["lo"].to_numpy(dtype=float)


def effective_length(
    avgs: pd.DataFrame, *, threshold: float | str = 85.6, rule: Rule = "max"
) -> pd.DataFrame:
    """Effective context length per model: the longest length still graded above threshold.

    ``rule="max"`` (default) is the paper's definition, "the maximum length
    exceeding the threshold" (RULER Section 4; its appendix tables 13 and 14
    count lengths after a dip). ``rule="contiguous"`` is the largest evaluated length L such that
    the score is strictly above ``threshold`` at every evaluated length <= L,
    i.e. the length just before the first failure counting up from the
    shortest. A dip below threshold therefore ends the effective range even if
    longer lengths recover; the two agree on every row of RULER Table 3.

    Returns one row per model with ``effective_length`` (``<NA>`` when even the
    shortest length fails), ``effective_length_lower`` (the same rule on the
    lower CI bound, i.e. what the interval supports; ``<NA>`` also when no CI
    exists, see ``lower_known``), ``passes_all`` (every evaluated length passed,
    so the true effective length is at least the longest tested), the
    shortest/longest evaluated lengths and ``withheld``: why there is no effective length although the model
    has scores (a cell not complete, or a task set with no threshold), else "". ``threshold`` is a percentage or a
    :func:`resolve_threshold` spec. CI lower is a lower confidence bound on the effective length at the intervals'
    one-sided level, (1 − ci)/2: under "max" each length's bound spends it over the K lengths (``lo_spent``,
    :func:`_lower_bounds`).
    """
    if rule not in ("contiguous", "max"):
        raise ValueError(f"rule must be 'contiguous' or 'max', got {rule!r}")
    thr = resolve_threshold(avgs, threshold)
    rows = []
    for model, group in avgs.sort_values("length").groupby("model", sort=True):
        reason = withheld_reason(group)
        group = group[np.isfinite(group["mean"].to_numpy(dtype=float))]  # withheld lengths say nothing
        if group.empty:
            rows.append((model, None, None, False, False, 0, 0, reason))
            continue
        key = str(group["task_set_key"].iat[0]) if "task_set_key" in group else ""
        reason = reason or ("" if has_threshold(key) else NO_THRESHOLD)
        if reason:
            rows.append((model, None, None, False, False, int(group["length"].iat[0]), int(group["length"].iat[-1]),
                         reason))
            continue
        lengths = group["length"].to_numpy()
        passes = _above(group["mean"].to_numpy(dtype=float) * 100, thr)
        lower = _lower_bounds(group, rule)
        lower_known = bool(np.isfinite(lower).all())
        lower_len = _graded_length(lengths, _above(lower * 100, thr), rule) if lower_known else None
        rows.append((model, _graded_length(lengths, passes, rule), lower_len, lower_known, bool(passes.all()),
                     int(lengths[0]), int(lengths[-1]), ""))
    out = pd.DataFrame(rows, columns=["model", "effective_length", "effective_length_lower", "lower_known",
                                      "passes_all", "shortest", "longest", "withheld"])
    for col in ("effective_length", "effective_length_lower"):
        out[col] = out[col].astype("Int64")
    out.attrs["threshold"] = thr
    return out


def relative_effective_length(avgs: pd.DataFrame, *, percent: float, rule: Rule = "max") -> pd.DataFrame:
    """NoLiMa's effective length, relative to the model itself: the longest length whose score is at least
    ``percent`` % of the model's own score at its shortest length (its base score), under ``rule`` as
    :func:`effective_length`. Scale-free, so it applies to every task set; withheld while a cell is incomplete, and
    when the base score is 0 (every length would pass). One row per model: ``relative_effective_length``,
    ``relative_base`` (0..1) and ``relative_withheld``."""
    if not 0 < percent <= 100:
        raise ValueError(f"relative threshold must be a percentage in (0, 100], got {percent}")
    rows = []
    for model, group in avgs.sort_values("length").groupby("model", sort=True):
        reason = withheld_reason(group)
        group = group[np.isfinite(group["mean"].to_numpy(dtype=float))]
        if group.empty or reason:
            rows.append((model, None, np.nan, reason or "no scores"))
            continue
        scores = group["mean"].to_numpy(dtype=float)
        if scores[0] <= 0:
            rows.append((model, None, float(scores[0]), "score 0 at the shortest length"))
            continue
        bar = scores[0] * percent / 100
        passes = (scores >= bar) | np.isclose(scores, bar, rtol=0, atol=1e-12)  # "at least": equal passes
        rows.append((model, _graded_length(group["length"].to_numpy(), passes, rule), float(scores[0]), ""))
    out = pd.DataFrame(rows, columns=["model", "relative_effective_length", "relative_base", "relative_withheld"])
    out["relative_effective_length"] = out["relative_effective_length"].astype("Int64")
    out.attrs["relative_percent"] = percent
    return out


def comparison_groups(summary: pd.DataFrame) -> tuple[set[str], set[str]]:
    """(models whose averages compare, models set apart): the first share the task set most models have (ties:
    more tasks), the others were scored on other tasks. A paper's own averages (task set "reported", tasks
    unknown) stay with the first, as RULER's tables list them."""
    keys = {r.model: str(r.task_set_key) for r in summary.itertuples() if r.task_set != "reported"}
    counts = Counter(k for k in keys.values() if k)
    if len(set(keys.values())) <= 1 or not counts:
        return set(summary["model"]), set()
    shared = max(counts, key=lambda k: (counts[k], len(k.split(",")), k))
    apart = {m for m, k in keys.items() if k != shared}
    return set(summary["model"]) - apart, apart


def _rank_group(groups: dict[str, tuple]) -> tuple | None:
    """The (task set, length set) most models share, if at least two do (ties: more lengths, then longer ones)."""
    counts = Counter(g for g in groups.values() if g is not None)
    if not counts:
        return None
    best = max(counts, key=lambda g: (counts[g], len(g[1]), g[1], g[0]))
    return best if counts[best] >= 2 else None


def weighted_averages(avgs: pd.DataFrame) -> pd.DataFrame:
    """Avg, wAvg(inc) and wAvg(dec) per model, with ranks (1 = best, ties share the min rank).

    Weights are rank-linear over the lengths the model has a score at, sorted ascending: 1..n for inc, n..1 for
    dec, whatever the spacing (4K, 16K, 128K -> 1, 2, 3). Averages over different length or task sets are not
    comparable, so ranks are given only among the models that share the most common (task set, length set), and
    only when at least two do (``ranked``); others, such as a 4K-only baseline or a model scored on other tasks,
    get ``<NA>`` ranks, as RULER lists Llama-2-7B without a rank. Withheld lengths (NaN) are left out; a model
    whose headline is withheld (a cell incomplete or failed, see aggregate.headline_withheld) gets none.
    """
    rows, groups = [], {}
    for model, group in avgs.sort_values("length").groupby("model", sort=True):
        withheld = withheld_reason(group)
        group = group[np.isfinite(group["mean"].to_numpy(dtype=float))]
        scores = group["mean"].to_numpy(dtype=float)
        if not scores.size or withheld:
            rows.append((model, 0, np.nan, np.nan, np.nan))
            groups[model] = None
            continue
        weights = np.arange(1, scores.size + 1, dtype=float)
        task_set = str(group["task_set_key"].iat[0]) if "task_set_key" in group else ""
        groups[model] = (task_set, tuple(int(x) for x in group["length"]))
        rows.append((model, scores.size, float(scores.mean()), float(np.average(scores, weights=weights)),
                     float(np.average(scores, weights=weights[::-1]))))
    out = pd.DataFrame(rows, columns=["model", "n_lengths", "avg", "wavg_inc", "wavg_dec"])
    if out.empty:
        return out.assign(ranked=pd.Series(dtype=bool), rank_avg=pd.Series(dtype="Int64"),
                          rank_inc=pd.Series(dtype="Int64"), rank_dec=pd.Series(dtype="Int64"))
    target = _rank_group(groups)
    out["ranked"] = [target is not None and groups[m] == target for m in out["model"]]
    for col, rank_col in (("avg", "rank_avg"), ("wavg_inc", "rank_inc"), ("wavg_dec", "rank_dec")):
        # Rounding keeps float noise from splitting genuine ties.
        ranks = out.loc[out["ranked"], col].round(10).rank(ascending=False, method="min")
        out[rank_col] = ranks.reindex(out.index).astype("Int64")
    return out
