"""The board's prose and comparison pieces: how to read the numbers, the score-by-length curves, and one paired
comparison (its section and its JSON). Split from report.py, which assembles the board."""

from __future__ import annotations

import pandas as pd

from . import plots
from .aggregate import PairedComparison
from .frame import format_length
from .ranking import Rule, comparison_groups
from .render import Figure, Section
from .tables import REPORTED_MARK, comparison_display, curve_tasks


def percent_records(frame: pd.DataFrame, columns) -> list[dict]:
    """Rows as records with `columns` in percent (results.json)."""
    out = frame.copy()
    for col in columns:
        out[col] = (out[col] * 100).round(6)  # drop float noise like 86.00000000000001
    return out.to_dict(orient="records")


def preamble(avgs: pd.DataFrame, *, threshold: float | str, thr: float, rule: Rule, ci: float,
              relative: float | None) -> tuple[str, ...]:
    """How to read the numbers: intervals, averages, the effective-length rule and its threshold."""
    rule_text = (
        "the longest length before the first score at or below the threshold, counting up from the shortest"
        if rule == "contiguous"
        else "the longest length whose score is above the threshold"
    )
    preamble = (
        f"Scores are percentages with {ci:.0%} intervals: exact Clopper–Pearson for 0/1 scores; for continuous ones "
        "with at least 10 samples (else 'n too small') the hull of a bootstrap-t and a Clopper–Pearson at the "
        "variance-matched sample size; cluster-robust where samples share a haystack or document (an all-correct "
        "clustered cell counts its clusters, not its samples). n is the "
        "number of distinct samples scored; a sample scored in several runs of one model counts once.",
        "A model's score at a length is the mean of its task means (every task weighs equally) over the tasks it has "
        "scores for at every one of its lengths, so no length averages a different set of tasks; for 0/1 scores its "
        "interval is Clopper–Pearson at the effective sample size of that mean (the smaller of the design-effect and "
        "the variance-based one, each task shrunk towards ½; when every task is perfect, the smallest task bounds "
        "it), for continuous scores the hull of a stratified bootstrap-t and the matched Clopper–Pearson.",
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


def curves_section(avgs: pd.DataFrame, summary: pd.DataFrame, thr: float) -> Section:
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


def comparison_section(comp: PairedComparison) -> Section:
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


def interval_words(comp: PairedComparison) -> str:
    """The overall difference with its 95% interval in points, or why it has none."""
    delta = f"Difference {comp.overall * 100:+.1f} points"
    if comp.ci is None:
        return f"{delta}; {comp.ci_note}."
    text = f"{delta}, 95% CI [{comp.ci[0] * 100:+.1f}, {comp.ci[1] * 100:+.1f}] ({comp.ci_note})."
    if (comp.ci[0] <= 0 <= comp.ci[1]) == (comp.p_value < comp.alpha):
        text += " The verdict is the exact test's; the interval, an approximation, disagrees with it here."
    return text


def comparison_json(comp: PairedComparison) -> dict:
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
        "cells": percent_records(comp.cells, ["diff"]),
        "by_length": percent_records(comp.by_length, ["diff"]),
        "length_labels": [format_length(x) for x in comp.by_length["length"]],
    }
