"""Report plots rendered to PNG bytes.

matplotlib is imported inside each function and figures are drawn through
``matplotlib.figure.Figure`` (Agg canvas) rather than pyplot, so building a
report neither costs an import at package load nor changes the caller's
global backend or figure state.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .frame import format_length

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure

    from .aggregate import PairedComparison


def plot_label(text: object) -> str:
    """Make arbitrary text literal for matplotlib.

    ``$`` would start mathtext (and can raise on odd input) and a leading ``_``
    hides a legend entry, so both are neutralised.
    """
    text = str(text).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _figure(width: float, height: float) -> MplFigure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: MplFigure) -> bytes:
    buffer = io.BytesIO()
    # No Software/URL metadata: the report must carry no external references at all.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _length_axis(ax, lengths: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(lengths))
    ax.set_xticklabels([format_length(x) for x in lengths])
    ax.minorticks_off()


def length_curves(avgs: pd.DataFrame, *, threshold: float, labels: dict[str, str] | None = None,
                  apart: frozenset[str] = frozenset()) -> bytes:
    """Score (%) against length per model, CI error bars, threshold as a dashed line. `labels`: each model's legend
    entry (its task count); models in `apart` were scored on other tasks and are drawn dotted."""
    labels = labels or {}
    fig = _figure(8, 4.8)
    ax = fig.add_subplot()
    colours = _colours(avgs["model"].nunique())
    for colour, (model, group) in zip(
        colours, avgs.sort_values("length").groupby("model"), strict=True
    ):
        x, y = group["length"].to_numpy(), group["mean"].to_numpy() * 100
        err = np.vstack([y - group["lo"].to_numpy() * 100, group["hi"].to_numpy() * 100 - y])
        reported = group["source"].iat[0] == "reported"
        ax.errorbar(
            x,
            y,
            yerr=None if reported else np.nan_to_num(err),
            color=colour,
            marker="o",
            ms=4,
            capsize=3,
            lw=1.5,
            ls=":" if model in apart else "--" if reported else "-",
            label=plot_label(labels.get(model, model)),
        )
    ax.axhline(
        threshold, color="grey", ls=":", lw=1, label=plot_label(f"threshold {threshold:.1f}")
    )
    _length_axis(ax, sorted(avgs["length"].unique()))
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _png(fig)


def _colours(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(max(n, 1))]


def depth_heatmap(matrix: pd.DataFrame, *, title: str) -> bytes:
    """Accuracy (%) over needle depth (rows) × length (columns) for one model and task."""
    values = matrix.to_numpy(dtype=float) * 100
    fig = _figure(1.6 + 0.75 * values.shape[1], 1.4 + 0.32 * values.shape[0])
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(values.shape[1]), [format_length(c) for c in matrix.columns])
    ax.set_yticks(range(values.shape[0]), [f"{d:g}%" for d in matrix.index])
    ax.set_xlabel("context length")
    ax.set_ylabel("needle depth")
    ax.set_title(plot_label(title), fontsize=9)
    if values.size <= 400:
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=6)
    fig.colorbar(image, ax=ax, label="accuracy (%)")
    return _png(fig)


def position_curves(curve: pd.DataFrame, *, title: str) -> bytes:
    """Accuracy (%) by gold position per model with a CI band."""
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    colours = _colours(curve["model"].nunique())
    for colour, (model, group) in zip(
        colours, curve.sort_values("position").groupby("model"), strict=True
    ):
        x = group["position"].to_numpy()
        ax.plot(x, group["mean"] * 100, color=colour, marker="o", ms=3, label=plot_label(model))
        ax.fill_between(x, group["lo"] * 100, group["hi"] * 100, color=colour, alpha=0.2)
    ax.set_xlabel("gold position")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 102)
    ax.set_title(plot_label(title), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
    return _png(fig)


def forest_plot(comparison: PairedComparison) -> bytes:
    """Paired differences (percentage points) per length and overall; filled markers where the difference is
    significant (Holm-adjusted per length; the overall test as is), hollow where it is not."""
    by_length = comparison.by_length
    labels = [format_length(x) for x in by_length["length"]] + ["overall"]
    diffs = np.append(by_length["diff"].to_numpy(), comparison.overall) * 100
    p = np.append(by_length["p_holm"].to_numpy(), comparison.p_value)
    significant = p < comparison.alpha
    y = np.arange(len(labels))[::-1]
    fig = _figure(7, 1.2 + 0.4 * len(labels))
    ax = fig.add_subplot()
    colours = ["#b22222" if label == "overall" else "#1f5fa8" for label in labels]
    for yi, d, sig, colour, label in zip(y, diffs, significant, colours, labels):
        ax.plot([d], [yi], marker="D" if label == "overall" else "o", ms=8 if label == "overall" else 6, ls="none",
                color=colour, markerfacecolor=colour if sig else "white")
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(y, labels)
    ax.set_xlabel(plot_label(f"{comparison.model_a} − {comparison.model_b} (points); filled: p < {comparison.alpha:g}, "
                             "hollow: not significant"))
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def training_curves(losses: pd.DataFrame) -> bytes:
    """Training (solid) and validation (dashed, dots) loss against step, one colour per method, a line per seed."""
    fig = _figure(8, 4.2)
    ax = fig.add_subplot()
    methods = sorted(losses["method"].unique())
    for colour, method in zip(_colours(len(methods)), methods, strict=True):
        mine = losses[losses["method"] == method]
        for k, ((seed, split), group) in enumerate(mine.sort_values("step").groupby(["seed", "split"])):
            eval_split = split == "eval"
            ax.plot(group["step"], group["loss"], color=colour, lw=1.2, ls="--" if eval_split else "-",
                    marker="o" if eval_split else None, ms=3, alpha=0.8,
                    label=plot_label(method) if k == 0 else None)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _png(fig)


def position_loss_curves(curve: pd.DataFrame, *, length: int) -> bytes:
    """Mean token loss by position bucket (the context a token had), one line per method, at one length."""
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    part = curve[curve["length"] == length]
    methods = sorted(part["method"].unique())
    for colour, method in zip(_colours(len(methods)), methods, strict=True):
        g = part[part["method"] == method].sort_values("lo")
        ax.plot(g["lo"], g["loss"], color=colour, marker="o", ms=3, label=plot_label(method))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("token position (bucket start; context tokens before it)")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title(plot_label(f"held-out loss by position at length {format_length(length)}"), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
    return _png(fig)
