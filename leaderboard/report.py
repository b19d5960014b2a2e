"""Build the leaderboard report: Markdown, self-contained HTML, CSV and JSON.

Every file of a board is written into a temporary folder beside ``--out`` and moved into place once all are
written (publish_board), so a crash or a full disk never leaves a board mixed from two builds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctxbench.harness.core.errors import ConfigError
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
from .auc import auc_preamble, auc_value_columns, with_auc
from .claimed import claimed_frame, claimed_records, claimed_section
from .common_items import with_common_items
from .exports import provenance_section, results_csv, training_section, write_ruler_summaries
from .frame import AVG_TASK, format_length, model_meta, normalise
from .publish import publish_board
from .ranking import Rule, comparison_groups, effective_length, relative_effective_length, resolve_threshold, weighted_averages
from .render import Figure, Section, render_html, render_markdown
from .repeats import repeat_records, repeat_spread, repeats_section
from .tables import (
    REPORTED_MARK,
    category_display,
    comparison_display,
    curve_tasks,
    examples_display,
    main_table,
    main_tables,
    marks_legend,
    over_budget_notes,
    rank_note,
    reasoning_display,
    summary_frame,
    task_display,
)
from .viewer import board_page

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
    relative: float | None = None,
) -> tuple[tuple[str, ...], list[Section]]:
    """The report's preamble and sections, as plain text and figures (escaped when rendered)."""
    main_notes = (rank_note(summary), *marks_legend([avgs, tasks]))
    sections = [Section(title="Main results", tables=_main_and_reported(avgs, summary), notes=main_notes)]
    if not cats.empty:
        sections.append(Section(title="By category", tables=(category_display(cats),),
                                paragraphs=("Mean of task means within each category, over each model's common task set.",)))
    sections.append(_curves_section(avgs, summary, thr))
    heatmaps = _grid_sections(df)
    if heatmaps:
        sections.append(Section(title="Needle depth × length", figures=tuple(heatmaps), markdown=False))
    positions = _position_figures(df, n_boot=n_boot, seed=seed, ci=ci)
    if positions:
        sections.append(Section(title="Accuracy by gold position", figures=tuple(positions), markdown=False))
    sections += [_comparison_section(comp) for comp in compared]
    if tasks is not None:
        sections.append(Section(title="Per-task scores", tables=(task_display(tasks),), collapsed=True,
                                notes=marks_legend([tasks])))
    if examples:
        sections.append(Section(title="Example predictions", tables=(examples_display(examples),), collapsed=True))
    return _preamble(avgs, threshold=threshold, thr=thr, rule=rule, ci=ci, relative=relative), sections


def _main_and_reported(avgs: pd.DataFrame, summary: pd.DataFrame) -> tuple:
    """The user's own models are the main table (models on other tasks set apart below it); a paper's imported rows
    sit in a table of their own after it, so importing a table never pushes the measured models aside."""
    reported = summary["source"] == "reported"
    if not reported.any() or reported.all():
        return main_tables(avgs, summary)
    caption = (f"Reported in publications ({REPORTED_MARK}): imported numbers, not measured here, without per-sample "
               "data or intervals")
    return (*main_tables(avgs, summary[~reported]), main_table(avgs, summary[reported], caption=caption))


def _preamble(avgs: pd.DataFrame, *, threshold: float | str, thr: float, rule: Rule, ci: float,
              relative: float | None) -> tuple[str, ...]:
    """How to read the numbers: intervals, averages, the effective-length rule and its threshold."""
    rule_text = (
        "the longest length before the first score at or below the threshold, counting up from the shortest"
        if rule == "contiguous"
        else "the longest length whose score is above the threshold"
    )
    preamble = (
        f"Scores are percentages with {ci:.0%} intervals: exact Clopper–Pearson for 0/1 scores, a studentised "
        "bootstrap (bootstrap-t) for continuous ones with at least 10 samples (else 'n too small'); cluster-robust "
        "where samples share a haystack or document. n is the "
        "number of distinct samples scored; a sample scored in several runs of one model counts once.",
        "A model's score at a length is the mean of its task means (every task weighs equally) over the tasks it has "
        "scores for at every one of its lengths, so no length averages a different set of tasks; for 0/1 scores its "
        "interval is Clopper–Pearson at the effective sample size of that mean (the smaller of the design-effect and "
        "the variance-based one), for continuous scores a stratified bootstrap-t.",
        f"Effective length = {rule_text}; threshold {thr:.1f}"
        + (f" ({threshold})." if isinstance(threshold, str) else ".")
        + " 'CI lower' applies the same rule to each length's lower bound"
        + (f", with the error spent over the model's K lengths (level 1 − {1 - ci:g}/K): a lower confidence bound on "
           "the effective length." if rule == "max" else "."),
        "wAvg weights rise (inc) or fall (dec) linearly over each model's evaluated lengths.",
    )
    if (avgs["source"] == "reported").any():
        preamble += (f"{REPORTED_MARK} reported: numbers imported from a publication, without per-sample data or intervals.",)
    if relative is not None:
        preamble += (f"Effective (relative) = the longest length whose score is at least {relative:g}% of the model's own "
                     "score at its shortest length (NoLiMa's effective length); it needs no absolute threshold.",)
    return preamble


def _curves_section(avgs: pd.DataFrame, summary: pd.DataFrame, thr: float) -> Section:
    """Score by length, one curve per model; models scored on other tasks are drawn apart."""
    drawn = avgs[pd.notna(avgs["mean"])]
    if drawn.empty:  # e.g. a paper's per-task rows with no task at every one of its lengths: no average to draw
        return Section(title="Score by length", markdown=False, paragraphs=(
            "No curve: no model has an average at any length (each length's average needs the tasks scored at "
            "every one of that model's lengths).",))
    _, apart = comparison_groups(summary)
    labels = {r.model: f"{r.model} ({curve_tasks(r)}{'; other tasks' if r.model in apart else ''})"
              for r in summary.itertuples()}
    curve_notes = ["Error bars: the intervals of the main table." if pd.notna(drawn["lo"]).any() else "",
                   "Dashed lines: reported numbers." if (drawn["source"] == "reported").any() else "",
                   "Dotted coloured lines: models scored on other tasks, not comparable with the rest." if apart else "",
                   "The legend gives the tasks each curve averages. Dotted grey line: the threshold."]
    return Section(
        title="Score by length",
        markdown=False,
        figures=(Figure(png=plots.length_curves(drawn, threshold=thr, labels=labels, apart=frozenset(apart)),
                        alt="score by context length per model"),),
        notes=(" ".join(n for n in curve_notes if n),),
    )


def _comparison_section(comp: PairedComparison) -> Section:
    """One paired comparison: its verdict, the per-cell table and the forest plot."""
    return Section(
        title=f"Paired comparison: {comp.model_a} vs {comp.model_b}",
        paragraphs=(f"{comp.verdict[0].upper()}{comp.verdict[1:]}; {comp.method}. {interval_words(comp)}",),
        tables=(comparison_display(comp),),
        figures=(Figure(png=plots.forest_plot(comp), alt=f"paired differences {comp.model_a} minus {comp.model_b}"),),
        notes=(
            f"{comp.n_pairs} samples matched on task, length, seed and index ({comp.n_discordant} discordant); "
            f"dropped {comp.n_unmatched_a} only in {comp.model_a} and {comp.n_unmatched_b} only in {comp.model_b}. "
            "p: exact sign test (0/1 scores) or sign-flip permutation test (continuous), two-sided; "
            "p (Holm): adjusted within the rows of its kind (cells, lengths).",
        ),
    )


def build_report(
    df: pd.DataFrame,
    *,
    out_dir: str | Path,
    cells: pd.DataFrame | None = None,
    runs: pd.DataFrame | None = None,
    notes: Sequence[str] = (),
    threshold: float | str = 85.6,
    title: str = "ctxbench leaderboard",
    comparisons: Iterable[tuple[str, str]] = (),
    examples: Sequence[Mapping[str, object]] | None = None,
    rule: Rule = "max",
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    relative: float | None = None,
    auc: Sequence[int] = (),
    auc_scale: str = "tokens",
    sample_details: Mapping | None = None,  # viewer.sample_details: prompts, reasoning, tokens for samples.html
) -> Report:
    """Aggregate a long score frame and write ``leaderboard.md``, ``index.html``, ``results.csv``,
    ``results.json`` and RULER's ``summary/<model>/<length>/summary.csv`` into ``out_dir``.

    ``cells`` (planned/done/errored/pending per model, task and length, from the store) makes every cell say how
    complete it is; without it each cell's n is taken as planned. ``runs`` (one row per run, see
    :mod:`leaderboard.store_frame`) fills the provenance header; ``notes`` are shown under it. ``threshold`` is a
    percentage or a reference such as ``"model=Llama2 (7B)@4K"`` (see :func:`leaderboard.ranking.resolve_threshold`).
    ``comparisons`` lists (model A, model B) pairs for exact paired tests; ``examples`` are dicts with
    model/task/length/index/score/prediction/reference keys shown (escaped) in a collapsed section. ``relative``
    (a percentage) adds NoLiMa's relative effective length beside the absolute one (see
    :func:`leaderboard.ranking.relative_effective_length`). ``auc`` adds AUC@L columns for those lengths beside the
    default ones, over ``auc_scale`` ("tokens" as Context Arena, or "log2"; see :mod:`leaderboard.auc`).
    """
    out = Path(out_dir)  # created only in _write, once every number is computed and every input checked
    head, provenance = provenance_section(runs)
    head = (*head, *notes, *over_budget_notes(cells))
    df, long_cells, short_section, short_records = _split_short_context(df, cells, n_boot=n_boot, seed=seed, ci=ci)
    base = {"title": title, "provenance": {"header": list(head), "runs": [] if runs is None else _records(runs)}}
    if df.empty:  # only short-context results: no length axis to report
        sections = [s for s in (provenance, short_section) if s is not None]
        return _short_only_report(out, title, head, sections, {**base, "short_context": short_records}, df)
    settings = {"threshold_spec": threshold if isinstance(threshold, str) else None, "effective_length_rule": rule,
                "relative_effective_percent": relative, "ci": ci, "n_boot": n_boot, "seed": seed, "auc_scale": auc_scale}
    tasks = task_length_table(df[df["task"] != AVG_TASK], long_cells, n_boot=n_boot, seed=seed, ci=ci)
    avgs = length_averages(df, long_cells, n_boot=n_boot, seed=seed, ci=ci)
    thr, summary = _model_summary(df, avgs, threshold=threshold, rule=rule, relative=relative)
    summary = with_auc(summary, df, avgs, asked=auc, scale=auc_scale, level=ci)  # AUC@L beside effective length
    cats = category_table(df)
    compared = [_compared(df, a, b, seed=seed) for a, b in comparisons]
    tasks_shown = tasks[tasks["source"] == "measured"]
    preamble, sections = _sections(
        df, avgs=avgs, summary=summary, cats=cats, tasks=tasks_shown if len(tasks_shown) else None, compared=compared,
        examples=examples, threshold=threshold, thr=thr, rule=rule, n_boot=n_boot, seed=seed, ci=ci, relative=relative,
    )
    preamble = (*preamble, *auc_preamble(summary, auc_scale))
    claimed = claimed_frame(df, tasks, avgs)  # published rows beside this board's measurement of the same model
    repeats = repeat_spread(df, tasks, avgs)  # --repeats k: each repeat's score beside the interval
    sections[1:1] = [s for s in (claimed_section(claimed), repeats_section(repeats)) if s is not None]
    sections = with_common_items(sections, df, compared)  # each --compare: the items both models have, and how many
    if short_section is not None:
        sections.insert(1, short_section)
    sections += [s for s in (_reasoning_section(cells), training_section(runs), provenance) if s is not None]
    results = {**base, "scale": "percent", "threshold": thr, **settings,
               **_results_records(summary, avgs, tasks, cats, compared), "short_context": short_records,
               "claimed": claimed_records(claimed), "repeats": repeat_records(repeats)}
    return _write(out, title, (*head, *preamble), sections, results,
                  results_csv(tasks, avgs, summary, _short_frame(short_records["tasks"])), summaries=(df, tasks),
                  details=sample_details or {})


def _split_short_context(df: pd.DataFrame, cells: pd.DataFrame | None, *, n_boot: int, seed: int, ci: float):
    """The long-context rows and cells apart from the short-context (length 0, lm-eval) ones, which get their own
    section and results.json records."""
    df, short = short_context.split(normalise(df))
    long_cells, short_cells = (None, None) if cells is None else (cells[cells["length"] != 0], cells[cells["length"] == 0])
    if df.empty and short.empty:
        raise ValueError("build_report: the score frame has no rows")
    short_section, short_records = (
        short_context.section(short, short_cells, n_boot=n_boot, seed=seed, ci=ci) if not short.empty
        else (None, {"tasks": [], "categories": []})
    )
    return df, long_cells, short_section, short_records


def _short_only_report(out: Path, title: str, head, sections, results: dict, df: pd.DataFrame) -> Report:
    """Only short-context (lm-eval) results: no length axis, so no main table, curves or RULER summaries."""
    none = pd.DataFrame(columns=["model", "task", "length", "source"])  # no RULER summaries: old ones go
    return _write(out, title, head, sections, results, results_csv(None, None, None, _short_frame(results["short_context"]["tasks"])),
                  summaries=(df, none))


def _model_summary(df: pd.DataFrame, avgs: pd.DataFrame, *, threshold: float | str, rule: Rule,
                   relative: float | None) -> tuple[float, pd.DataFrame]:
    """The threshold resolved, and per model its effective lengths (absolute, and relative where asked) and averages."""
    try:
        thr = resolve_threshold(avgs, threshold)
    except ValueError as e:  # the user's --threshold (a number out of range, an unknown model or length)
        raise ConfigError(f"--threshold: {e}") from None
    eff = effective_length(avgs, threshold=thr, rule=rule)
    if relative is not None:
        eff = eff.merge(relative_effective_length(avgs, percent=relative, rule=rule), on="model", how="left")
    return thr, summary_frame(avgs, eff, weighted_averages(avgs), model_meta(df))


def _compared(df: pd.DataFrame, model_a: str, model_b: str, *, seed: int) -> PairedComparison:
    """A paired comparison the user asked for (--compare); a model it cannot pair is their input to fix."""
    try:
        return paired_comparison(df, model_a=model_a, model_b=model_b, seed=seed)
    except ValueError as e:
        raise ConfigError(f"--compare {model_a}:{model_b}: {e}; name two models on the board that share samples") from None


def _reasoning_section(cells: pd.DataFrame | None) -> Section | None:
    """Thinking runs: what their scores cost in reasoning tokens (None without one)."""
    thinking = reasoning_display(cells)
    if thinking is None:
        return None
    return Section(title="Reasoning cost", tables=(thinking,), notes=(
        "Mean reasoning tokens per sample of each cell of a thinking run (--thinking on); thinking_unfinished: samples "
        "whose reasoning never closed within the thinking budget, each counted 0 in the cell's score.",))


def _results_records(summary, avgs, tasks, cats, compared) -> dict[str, list]:
    """results.json's numbers, on the percent scale: per model, per length, per task, per category, comparisons."""
    return {
        "models": _percent_records(summary, ["avg", "wavg_inc", "wavg_dec", *auc_value_columns(summary)]),
        "lengths": _percent_records(avgs, ["mean", "lo", "hi"]),
        "tasks": _percent_records(tasks, ["mean", "lo", "hi"]),
        "categories": [] if cats.empty else _percent_records(cats.reset_index().rename(columns=str), [str(c) for c in cats.columns]),
        "comparisons": [_comparison_json(c) for c in compared],
    }


def _records(frame: pd.DataFrame) -> list[dict]:
    return jsonable(frame.to_dict(orient="records"))


def _write(out: Path, title: str, preamble, sections, results: dict, csv: str, *,
           summaries: tuple[pd.DataFrame, pd.DataFrame], details: Mapping | None = None) -> Report:
    """Every file of the board, written whole into a temporary folder and then moved into `out` (publish_board)."""
    report = Report(markdown=out / "leaderboard.md", html=out / "index.html", csv=out / "results.csv",
                    json=out / "results.json")

    def files(tmp: Path) -> None:
        atomic_write(tmp / report.json.name, json.dumps(jsonable(results), indent=2, allow_nan=False) + "\n")
        atomic_write(tmp / report.csv.name, csv)
        md_preamble = (*preamble, "Plots are in index.html.")
        atomic_write(tmp / report.markdown.name, render_markdown(title, sections, preamble=md_preamble))
        page = render_html(title, sections, preamble=preamble)  # + the sample viewer, linked from each cell
        atomic_write(tmp / report.html.name, page if details is None else board_page(tmp, page, summaries[0], details, title))
        write_ruler_summaries(tmp, *summaries)

    publish_board(out, files)
    return report


def _short_frame(records: list[dict]) -> pd.DataFrame:
    """Short-context rows of results.csv: per task, length 0, in percent."""
    df = pd.DataFrame(records, columns=["model", "task", "mean", "lo", "hi", "n", "planned", "errored", "status"])
    df = df.rename(columns={"mean": "score"})
    df.insert(2, "length", 0)
    df["source"] = "measured"
    return df


def interval_words(comp: PairedComparison) -> str:
    """The overall difference with its 95% interval in points, or why it has none."""
    delta = f"Difference {comp.overall * 100:+.1f} points"
    if comp.ci is None:
        return f"{delta}; {comp.ci_note}."
    text = f"{delta}, 95% CI [{comp.ci[0] * 100:+.1f}, {comp.ci[1] * 100:+.1f}] ({comp.ci_note})."
    if (comp.ci[0] <= 0 <= comp.ci[1]) == (comp.p_value < comp.alpha):
        text += " The verdict is the exact test's; the interval, an approximation, disagrees with it here."
    return text


def _comparison_json(comp: PairedComparison) -> dict:
    return {
        "model_a": comp.model_a,
        "model_b": comp.model_b,
        "overall": comp.overall * 100,
        "ci95": None if comp.ci is None else [comp.ci[0] * 100, comp.ci[1] * 100],
        "ci_note": comp.ci_note,
        "p_value": comp.p_value,
        "method": comp.method,
        "verdict": comp.verdict,
        "alpha": comp.alpha,
        "n_pairs": comp.n_pairs,
        "n_discordant": comp.n_discordant,
        "n_unmatched_a": comp.n_unmatched_a,
        "n_unmatched_b": comp.n_unmatched_b,
        "cells": _percent_records(comp.cells, ["diff"]),
        "by_length": _percent_records(comp.by_length, ["diff"]),
        "length_labels": [format_length(x) for x in comp.by_length["length"]],
    }
