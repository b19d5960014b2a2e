"""Claimed against measured: a published number (`ctxbench board import`) beside this board's own measurement of the
same model, with the difference and whether the published number lies inside the measured interval.

A published row matches a measured model when their names are the same after `name_key`: case, spaces, '-', '_'
and '.' are ignored, a Hugging Face organisation prefix (`meta-llama/`) is dropped, and so is the protocol tag the
board adds in brackets (`name [thinking on, 4096]`) and the " (reported)" the board gives a published name equal to a
measured one. Several measured models can match one published name (a
thinking run and a plain run): each gets its own row. A published row whose model, task or length was not measured
here reads "reported, not reproduced".
"""

from __future__ import annotations

import re

import pandas as pd

from .frame import AVG_TASK, REPORTED_SUFFIX, format_length
from .render import Section, Table
from .tables import pct, with_ci

NOT_REPRODUCED = "reported, not reproduced"
COLUMNS = ["published_model", "model", "task", "length", "published", "measured", "lo", "hi", "n", "difference",
           "verdict"]
_TAG = re.compile(r"\s*\[[^\]]*\]\s*$")
_IGNORED = re.compile(r"[\s\-_.]+")


def name_key(name: str) -> str:
    """The name two boards agree on: no protocol tag, no organisation prefix, no case, spaces or punctuation."""
    base = _TAG.sub("", str(name).removesuffix(REPORTED_SUFFIX)).strip()  # normalise() renames a clash "x (reported)"
    base = base.rsplit("/", 1)[-1] if "/" in base and " " not in base else base
    return _IGNORED.sub("", base).casefold()


def verdict(published: float, lo: object, hi: object) -> str:
    """Where the published number lies against the measured interval (both 0..1)."""
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return "no measured interval"
    if lo <= published <= hi:
        return "inside the interval"
    return "above the interval" if published > hi else "below the interval"


def claimed_frame(df: pd.DataFrame, tasks: pd.DataFrame, avgs: pd.DataFrame) -> pd.DataFrame:
    """One row per published (model, task or avg, length) number: beside each measured model it matches, or once,
    marked reported, not reproduced. Empty when nothing was imported. Scores on the 0..1 scale."""
    published = df[df["source"] == "reported"]
    if published.empty:
        return pd.DataFrame(columns=COLUMNS)
    measured_models = sorted(set(avgs.loc[avgs["source"] == "measured", "model"]) |
                             set(tasks.loc[tasks["source"] == "measured", "model"]))
    by_key: dict[str, list[str]] = {}
    for model in measured_models:
        by_key.setdefault(name_key(model), []).append(model)
    rows = []
    for r in published.itertuples(index=False):
        matches = [_measured_cell(model, r.task, int(r.length), tasks, avgs) for model in by_key.get(name_key(r.model), [])]
        matches = [m for m in matches if m is not None]
        if not matches:
            rows.append((r.model, "", r.task, int(r.length), float(r.score), *(None,) * 5, NOT_REPRODUCED))
        for model, cell in matches:
            diff = float(r.score) - float(cell["mean"])
            rows.append((r.model, model, r.task, int(r.length), float(r.score), float(cell["mean"]), cell["lo"],
                         cell["hi"], int(cell["n"]), diff, verdict(float(r.score), cell["lo"], cell["hi"])))
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["published_model", "task", "length", "model"], kind="stable", ignore_index=True)


def _measured_cell(model: str, task: str, length: int, tasks: pd.DataFrame, avgs: pd.DataFrame):
    """(model, its measured row) at that task (or average) and length, or None where it was not measured there."""
    table = avgs if task == AVG_TASK else tasks
    hit = table[(table["model"] == model) & (table["source"] == "measured") & (table["length"] == length)]
    if task != AVG_TASK:
        hit = hit[hit["task"] == task]
    hit = hit[pd.notna(hit["mean"])]
    return None if hit.empty else (model, hit.iloc[0])


def claimed_section(frame: pd.DataFrame) -> Section | None:
    """The side-by-side table, or None when no published row was imported."""
    if frame.empty:
        return None
    rows = tuple(
        (r.published_model, r.model or "—", r.task, format_length(r.length), pct(r.published),
         with_ci(r.measured, r.lo, r.hi) + (f" (n={int(r.n)})" if pd.notna(r.n) else ""),
         pct(r.difference, signed=True), r.verdict)
        for r in frame.itertuples(index=False))
    reproduced = int((frame["verdict"] != NOT_REPRODUCED).sum())
    table = Table(headers=("Published model", "Measured as", "Task", "Length", "Published", "Measured [interval]",
                           "Difference", "Verdict"), rows=rows)
    return Section(title="Claimed against measured", tables=(table,), notes=(
        f"{reproduced} of {len(frame)} published numbers were measured here. Difference: published minus measured, in "
        "points; the verdict says whether the published number lies inside the measured interval. A published name "
        "matches a measured model ignoring case, spaces, '-', '_', '.', an organisation prefix (org/) and the "
        f"board's [protocol] tag. '{NOT_REPRODUCED}': no measurement of that model, task and length here.",))


def claimed_records(frame: pd.DataFrame) -> list[dict]:
    """results.json's `claimed` list, on the percent scale (null where not reproduced)."""
    out = frame.astype(object).where(pd.notna(frame), None)
    records = out.to_dict(orient="records")
    for rec in records:
        for key in ("published", "measured", "lo", "hi", "difference"):
            rec[key] = None if rec[key] is None else round(float(rec[key]) * 100, 6)
        rec["model"] = rec["model"] or None
        rec["n"] = None if rec["n"] is None else int(rec["n"])
    return records
