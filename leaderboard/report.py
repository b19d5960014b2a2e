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
from .cost import cost_section
from .exports import provenance_section, results_csv, training_section, write_ruler_summaries
from .frame import AVG_TASK, model_meta, normalise
from .publish import publish_board
from .ranking import Rule, effective_length, relative_effective_length, resolve_threshold, weighted_averages
from .render import Figure, Section, render_html, render_markdown
from .repeats import repeat_records, repeat_spread, repeats_section
from .report_sections import comparison_json, comparison_section, curves_section, percent_records
from .report_sections import preamble as reading_notes
from .tables import (
    REPORTED_MARK,
    category_display,
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
    sections.append(curves_section(avgs, summary, thr))
    heatmaps = _grid_sections(df)
    if heatmaps:
        sections.append(Section(title="Needle depth × length", figures=tuple(heatmaps), markdown=False))
    positions = _position_figures(df, n_boot=n_boot, seed=seed, ci=ci)
    if positions:
        sections.append(Section(title="Accuracy by gold position", figures=tuple(positions), markdown=False))
    sections += [comparison_section(comp) for comp in compared]
    if tasks is not None:
        sections.append(Section(title="Per-task scores", tables=(task_display(tasks),), collapsed=True,
                                notes=marks_legend([tasks])))
    if examples:
        sections.append(Section(title="Example predictions", tables=(examples_display(examples),), collapsed=True))
    return reading_notes(avgs, threshold=threshold, thr=thr, rule=rule, ci=ci, relative=relative), sections


def _main_and_reported(avgs: pd.DataFrame, summary: pd.DataFrame) -> tuple:
    """The user's own models are the main table (models on other tasks set apart below it); a paper's imported rows
    sit in a table of their own after it, so importing a table never pushes the measured models aside."""
    reported = summary["source"] == "reported"
    if not reported.any() or reported.all():
        return main_tables(avgs, summary)
    caption = (f"Reported in publications ({REPORTED_MARK}): imported numbers, not measured here, without per-sample "
               "data or intervals")
    return (*main_tables(avgs, summary[~reported]), main_table(avgs, summary[reported], caption=caption))


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
    n = _board_numbers(df, long_cells, threshold=threshold, rule=rule, relative=relative, auc=auc, auc_scale=auc_scale,
                       comparisons=comparisons, n_boot=n_boot, seed=seed, ci=ci)
    tasks, avgs, thr, summary, cats, compared = n.tasks, n.avgs, n.thr, n.summary, n.cats, n.compared
    tasks_shown = tasks[tasks["source"] == "measured"]
    preamble, sections = _sections(
        df, avgs=avgs, summary=summary, cats=cats, tasks=tasks_shown if len(tasks_shown) else None, compared=compared,
        examples=examples, threshold=threshold, thr=thr, rule=rule, n_boot=n_boot, seed=seed, ci=ci, relative=relative,
    )
    preamble = (*preamble, *auc_preamble(summary, auc_scale))
    sections = _around(sections, n, df, short_section,
                       tail=(_reasoning_section(cells), cost_section(cells), training_section(runs), provenance))
    results = {**base, "scale": "percent", "threshold": thr, **settings, **_results_records(summary, avgs, tasks, cats, compared),
               "short_context": short_records, "claimed": claimed_records(n.claimed), "repeats": repeat_records(n.repeats)}
    return _write(out, title, (*head, *preamble), sections, results,
                  results_csv(tasks, avgs, summary, _short_frame(short_records["tasks"])), summaries=(df, tasks),
                  details=sample_details or {})


@dataclass(frozen=True)
class BoardNumbers:
    """Every number a board with a length axis shows, computed before anything is written."""

    tasks: pd.DataFrame  # per task and length (task_length_table)
    avgs: pd.DataFrame  # per model and length (length_averages)
    thr: float  # the effective-length threshold, resolved to a percentage
    summary: pd.DataFrame  # per model: effective lengths, averages, AUC@L
    cats: pd.DataFrame  # per model and category
    compared: list  # each --compare pair's paired tests
    claimed: pd.DataFrame | None  # published rows beside this board's measurement of the same model
    repeats: pd.DataFrame | None  # --repeats k: each repeat's score beside the interval


def _board_numbers(df: pd.DataFrame, long_cells: pd.DataFrame | None, *, threshold: float | str, rule: Rule,
                   relative: float | None, auc: Sequence[int], auc_scale: str, comparisons: Iterable[tuple[str, str]],
                   n_boot: int, seed: int, ci: float) -> BoardNumbers:
    """The board's tables of numbers from the long-context rows: tasks, length averages, the model summary (effective
    length, AUC@L), categories, paired comparisons, published claims and repeats."""
    tasks = task_length_table(df[df["task"] != AVG_TASK], long_cells, n_boot=n_boot, seed=seed, ci=ci)
    avgs = length_averages(df, long_cells, n_boot=n_boot, seed=seed, ci=ci)
    thr, summary = _model_summary(df, avgs, threshold=threshold, rule=rule, relative=relative)
    summary = with_auc(summary, df, avgs, asked=auc, scale=auc_scale, level=ci)  # AUC@L beside effective length
    compared = [_compared(df, a, b, seed=seed) for a, b in comparisons]
    return BoardNumbers(tasks, avgs, thr, summary, category_table(df), compared, claimed_frame(df, tasks, avgs),
                        repeat_spread(df, tasks, avgs))


def _around(sections: list, n: BoardNumbers, df: pd.DataFrame, short_section: Section | None,
            tail: Sequence[Section | None]) -> list:
    """The measured sections with what stands beside them: published claims and repeats after the first, each
    --compare's common items, the short-context section second, and the tail (reasoning, cost, training,
    provenance) last."""
    sections[1:1] = [s for s in (claimed_section(n.claimed), repeats_section(n.repeats)) if s is not None]
    sections = with_common_items(sections, df, n.compared)  # each --compare: the items both models have, and how many
    if short_section is not None:
        sections.insert(1, short_section)
    return sections + [s for s in tail if s is not None]


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
        "models": percent_records(summary, ["avg", "wavg_inc", "wavg_dec", *auc_value_columns(summary)]),
        "lengths": percent_records(avgs, ["mean", "lo", "hi"]),
        "tasks": percent_records(tasks, ["mean", "lo", "hi"]),
        "categories": [] if cats.empty else percent_records(cats.reset_index().rename(columns=str), [str(c) for c in cats.columns]),
        "comparisons": [comparison_json(c) for c in compared],
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


