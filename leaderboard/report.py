"""Build the leaderboard report: Markdown, self-contained HTML, CSV and JSON.

All four files are written atomically (temp file + ``os.replace``) so a
crash or a concurrent reader never sees a half-written report.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctxbench.harness.core.io import atomic_write, jsonable

from . import plots, short_context
from .aggregate import (
    PairedComparison,
    category_table,
    depth_length_matrix,
    length_averages,
    paired_comparison,
    position_curve,
    task_length_table,
)
from .frame import AVG_TASK, format_length, model_meta, normalise
from .ranking import Rule, effective_length, resolve_threshold, weighted_averages
from .render import Figure, Section, render_html, render_markdown
from .tables import (
    REPORTED_MARK,
    category_display,
    comparison_display,
    examples_display,
    main_table,
    summary_frame,
    task_display,
)

GRID_PREFIX = "niah/"


@dataclass(frozen=True)
class Report:
    """Paths of the files :func:`build_report` wrote."""

    markdown: Path
    html: Path
    csv: Path
    json: Path


def _percent_records(frame: pd.DataFrame, columns: Sequence[str]) -> list[dict]:
    out = frame.copy()
    for col in columns:
        out[col] = (out[col] * 100).round(6)  # drop float noise like 86.00000000000001
    return out.to_dict(orient="records")


def _results_csv(avgs: pd.DataFrame, summary: pd.DataFrame) -> str:
    """Per (model, length) rows in percent; importable again with ``import_reported_csv``."""
    rows = avgs.drop(columns=["claimed_length"]).merge(summary, on="model", how="left")
    out = pd.DataFrame(
        {
            "model": rows["model"],
            "task": AVG_TASK,
            "length": rows["length"],
            "score": rows["mean"] * 100,
            "lo": rows["lo"] * 100,
            "hi": rows["hi"] * 100,
            "n_tasks": rows["n_tasks"],
            "n": rows["n"],
            "source": rows["source_x"],
            "claimed_length": rows["claimed_length"].astype("Int64"),
            "effective_length": rows["effective_length"],
            "effective_length_lower": rows["effective_length_lower"],
            "avg": rows["avg"] * 100,
            "wavg_inc": rows["wavg_inc"] * 100,
            "wavg_dec": rows["wavg_dec"] * 100,
            "rank_avg": rows["rank_avg"],
            "rank_inc": rows["rank_inc"],
            "rank_dec": rows["rank_dec"],
        }
    )
    return out.to_csv(index=False, float_format="%.4f", lineterminator="\n")


def _grid_sections(df: pd.DataFrame) -> list[Figure]:
    figures = []
    grid = df[df["task"].str.startswith(GRID_PREFIX) & df["depth"].notna()]
    for task, rows in grid.groupby("task", sort=True):
        if rows["depth"].round().nunique() < 2:
            continue
        matrix = depth_length_matrix(rows, task)
        for model in matrix.index.get_level_values("model").unique():
            figures.append(
                Figure(
                    png=plots.depth_heatmap(matrix.loc[model], title=f"{model} · {task}"),
                    alt=f"depth × length accuracy, {model}, {task}",
                )
            )
    return figures


def _position_figures(df: pd.DataFrame, *, n_boot: int, seed: int, ci: float) -> list[Figure]:
    figures = []
    for task in sorted(df.loc[df["position"].notna(), "task"].unique()):
        curve = position_curve(df, task, n_boot=n_boot, seed=seed, ci=ci)
        figures.append(
            Figure(
                png=plots.position_curves(curve, title=f"accuracy by gold position · {task}"),
                alt=f"accuracy by gold position, {task}",
            )
        )
    return figures


def _sections(
    df: pd.DataFrame,
    *,
    avgs: pd.DataFrame,
    summary: pd.DataFrame,
    cats: pd.DataFrame,
    tasks: pd.DataFrame | None,
    compared: Sequence[PairedComparison],
    examples: Sequence[Mapping[str, object]] | None,
    threshold: float | str,
    thr: float,
    rule: Rule,
    n_boot: int,
    seed: int,
    ci: float,
) -> tuple[tuple[str, ...], list[Section]]:
    """The report's preamble and sections, as plain text and figures (escaped when rendered)."""
    rule_text = (
        "the longest length before the first score at or below the threshold, counting "
        "up from the shortest"
        if rule == "contiguous"
        else "the longest length whose score is above the threshold"
    )
    preamble = (
        f"Scores are percentages; intervals are {ci:.0%} percentile-bootstrap CIs over samples "
        f"({n_boot} resamples, seed {seed}). A model's score at a length is the mean of its task "
        "means (every task weighs equally).",
        f"Effective length = {rule_text}; threshold {thr:.1f}"
        + (f" ({threshold})." if isinstance(threshold, str) else ".")
        + " 'CI lower' applies the same rule to the lower bound of the interval.",
        "wAvg weights rise (inc) or fall (dec) linearly over each model's evaluated lengths; "
        "ranks (1st = best) are given among models evaluated at the same set of lengths.",
        f"{REPORTED_MARK} reported: numbers imported from a publication, without per-sample data or CIs.",
    )
    sections = [Section(title="Main results", tables=(main_table(avgs, summary),))]
    if not cats.empty:
        sections.append(
            Section(
                title="By category",
                tables=(category_display(cats),),
                paragraphs=("Mean of task means within each category.",),
            )
        )
    sections.append(
        Section(
            title="Score by length",
            markdown=False,
            figures=(
                Figure(
                    png=plots.length_curves(avgs, threshold=thr),
                    alt="score by context length per model",
                ),
            ),
            notes=("Dashed lines: reported numbers; dotted line: threshold.",),
        )
    )
    heatmaps = _grid_sections(df)
    if heatmaps:
        sections.append(
            Section(title="Needle depth × length", figures=tuple(heatmaps), markdown=False)
        )
    positions = _position_figures(df, n_boot=n_boot, seed=seed, ci=ci)
    if positions:
        sections.append(
            Section(title="Accuracy by gold position", figures=tuple(positions), markdown=False)
        )
    for comp in compared:
        sections.append(
            Section(
                title=f"Paired comparison: {comp.model_a} vs {comp.model_b}",
                tables=(comparison_display(comp),),
                figures=(
                    Figure(
                        png=plots.forest_plot(comp),
                        alt=f"paired differences {comp.model_a} minus {comp.model_b}",
                    ),
                ),
                notes=(
                    f"{comp.n_pairs} matched samples; dropped {comp.n_unmatched_a} only in "
                    f"{comp.model_a} and {comp.n_unmatched_b} only in {comp.model_b}.",
                ),
            )
        )
    if tasks is not None:
        sections.append(
            Section(title="Per-task scores", tables=(task_display(tasks),), collapsed=True)
        )
    if examples:
        sections.append(
            Section(
                title="Example predictions", tables=(examples_display(examples),), collapsed=True
            )
        )

    return preamble, sections


def build_report(
    df: pd.DataFrame,
    *,
    out_dir: str | Path,
    threshold: float | str = 85.6,
    title: str = "ctxbench leaderboard",
    comparisons: Iterable[tuple[str, str]] = (),
    examples: Sequence[Mapping[str, object]] | None = None,
    rule: Rule = "max",
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> Report:
    """Aggregate a long score frame and write ``leaderboard.md``, ``index.html``,
    ``results.csv`` and ``results.json`` into ``out_dir``.

    ``threshold`` is a percentage or a reference such as
    ``"model=Llama2 (7B)@4K"`` (see :func:`leaderboard.ranking.resolve_threshold`).
    ``comparisons`` lists (model A, model B) pairs for paired-bootstrap
    differences; ``examples`` are dicts with model/task/length/index/score/
    prediction/reference keys shown (escaped) in a collapsed section.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df, short = short_context.split(normalise(df))
    if df.empty and short.empty:
        raise ValueError("build_report: the score frame has no rows")
    short_section, short_records = (
        short_context.section(short, n_boot=n_boot, seed=seed, ci=ci) if not short.empty else (None, {"tasks": [], "categories": []})
    )
    if df.empty:  # only short-context results: no length axis to report
        return _write(out, title, (), [short_section], {"title": title, "short_context": short_records}, None, None)
    avgs = length_averages(df, n_boot=n_boot, seed=seed, ci=ci)
    thr = resolve_threshold(avgs, threshold)
    eff = effective_length(avgs, threshold=thr, rule=rule)
    summary = summary_frame(avgs, eff, weighted_averages(avgs), model_meta(df))
    measured = df[df["task"] != AVG_TASK]
    tasks = task_length_table(measured, n_boot=n_boot, seed=seed, ci=ci) if len(measured) else None
    cats = category_table(df)
    compared = [
        paired_comparison(df, model_a=a, model_b=b, n_boot=n_boot, seed=seed, ci=ci)
        for a, b in comparisons
    ]

    preamble, sections = _sections(
        df,
        avgs=avgs,
        summary=summary,
        cats=cats,
        tasks=tasks,
        compared=compared,
        examples=examples,
        threshold=threshold,
        thr=thr,
        rule=rule,
        n_boot=n_boot,
        seed=seed,
        ci=ci,
    )
    if short_section is not None:
        sections.insert(1, short_section)
    results = {
        "title": title,
        "scale": "percent",
        "threshold": thr,
        "threshold_spec": threshold if isinstance(threshold, str) else None,
        "effective_length_rule": rule,
        "ci": ci,
        "n_boot": n_boot,
        "seed": seed,
        "models": _percent_records(summary, ["avg", "wavg_inc", "wavg_dec"]),
        "lengths": _percent_records(avgs, ["mean", "lo", "hi"]),
        "tasks": [] if tasks is None else _percent_records(tasks, ["mean", "lo", "hi"]),
        "categories": []
        if cats.empty
        else _percent_records(
            cats.reset_index().rename(columns=str), [str(c) for c in cats.columns]
        ),
        "comparisons": [_comparison_json(c) for c in compared],
        "short_context": short_records,
    }
    return _write(out, title, preamble, sections, results, avgs, summary)


def _write(out: Path, title: str, preamble, sections, results: dict, avgs, summary) -> Report:
    report = Report(
        markdown=out / "leaderboard.md",
        html=out / "index.html",
        csv=out / "results.csv",
        json=out / "results.json",
    )
    atomic_write(report.json, json.dumps(jsonable(results), indent=2, allow_nan=False) + "\n")
    short = _short_frame(results["short_context"]["tasks"])
    long = _results_csv(avgs, summary) if avgs is not None else ""
    csv = pd.concat([pd.read_csv(io.StringIO(long)), short], ignore_index=True) if long else short
    atomic_write(report.csv, csv.to_csv(index=False, float_format="%.4f", lineterminator="\n"))
    md_preamble = (*preamble, "Plots are in index.html.")
    atomic_write(report.markdown, render_markdown(title, sections, preamble=md_preamble))
    atomic_write(report.html, render_html(title, sections, preamble=preamble))
    return report


def _short_frame(records: list[dict]) -> pd.DataFrame:
    """Short-context rows of results.csv: per task, length 0, in percent."""
    df = pd.DataFrame(records, columns=["model", "task", "mean", "lo", "hi", "n"]).rename(columns={"mean": "score"})
    df.insert(2, "length", 0)
    df["source"] = "measured"
    return df


def _comparison_json(comp: PairedComparison) -> dict:
    return {
        "model_a": comp.model_a,
        "model_b": comp.model_b,
        "ci": comp.ci,
        "overall": comp.overall * 100,
        "overall_lo": comp.overall_lo * 100,
        "overall_hi": comp.overall_hi * 100,
        "n_pairs": comp.n_pairs,
        "n_unmatched_a": comp.n_unmatched_a,
        "n_unmatched_b": comp.n_unmatched_b,
        "cells": _percent_records(comp.cells, ["diff", "lo", "hi"]),
        "by_length": _percent_records(comp.by_length, ["diff", "lo", "hi"]),
        "length_labels": [format_length(x) for x in comp.by_length["length"]],
    }
