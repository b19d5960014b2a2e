"""RULER's metrics, per sample in [0, 1]. Task scores are means ×100, computed by the leaderboard.

string_match_part is ANY-of (1 if any reference is found), not the fraction of references found,
which is what lm-evaluation-harness computes for RULER QA.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxbench.harness.core.registry import register

_CONTROL = re.compile(r"[\x00-\x1f]")


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
