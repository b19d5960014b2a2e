"""RULER's metrics, per sample in [0, 1]. Task scores are means ×100, computed by the leaderboard.

A metric declares its scale and direction where it registers (`register("metric", name, scale="raw",
higher_is_better=False)`); undeclared, it is a fraction in [0, 1] where higher is better. The board reads
`metric_scale`: only fractions where higher is better are averaged ×100 and ranked; others (perplexity) are shown
raw in the run's summary, never as a percentage.

string_match_part is ANY-of (1 if any reference is found), not the fraction of references found,
which is what lm-evaluation-harness computes for RULER QA.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ctxbench.harness.core import registry
from ctxbench.harness.core.registry import register

_CONTROL = re.compile(r"[\x00-\x1f]")


@dataclass(frozen=True)
class MetricScale:
    """How a metric's per-sample values read: a fraction in [0, 1] (means shown ×100) or raw (shown as they are), and
    whether higher is better."""

    scale: Literal["fraction", "raw"] = "fraction"
    higher_is_better: bool = True

    @property
    def on_percent_board(self) -> bool:
        """The board averages task means ×100 and ranks them higher-first: only such metrics belong there."""
        return self.scale == "fraction" and self.higher_is_better


@functools.cache
def metric_scale(name: str) -> MetricScale:
    """A metric's declared scale (a fraction, higher better, when it declares none or is a task's own name)."""
    declared = registry.info("metric", name)
    return MetricScale(**{k: declared[k] for k in ("scale", "higher_is_better") if k in declared})


@register("metric", "perplexity", scale="raw", higher_is_better=False)
def perplexity(prediction: str, references: Sequence[str]) -> float:
    """exp(mean token loss) of a document: scored from the model's log-probs (tasks/ppl/task.py), not from a prediction."""
    raise ValueError("perplexity is computed from log-probs (score_logprobs), not from a prediction")


def postprocess(prediction: str) -> str:
    """Strip, and turn control characters into newlines, as the reference evaluator does."""
    return _CONTROL.sub("\n", prediction.strip()).strip()


@register("metric", "string_match_all")
def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """Fraction of references found (case-insensitive substring) in the prediction."""
    if not references:
        raise ValueError("string_match_all needs at least one reference")
    pred = postprocess(prediction).lower()
    return sum(r.lower() in pred for r in references) / len(references)


@register("metric", "string_match_part")
def string_match_part(prediction: str, references: Sequence[str]) -> float:
    """1 if any reference is found (case-insensitive substring) in the prediction, else 0."""
    if not references:
        raise ValueError("string_match_part needs at least one reference")
    pred = postprocess(prediction).lower()
    return float(any(r.lower() in pred for r in references))


def is_empty(prediction: str) -> bool:
    return not postprocess(prediction)
