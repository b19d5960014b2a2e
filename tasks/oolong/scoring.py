"""Oolong's answer parsing and scoring, as the official eval_helpers.py runs them (abertsch72/oolong).

Synth: the answer is what follows the response's last colon, stripped, with `*`, `[` and `]` removed (in that
order: strip first, so "**Answer:** x" parses as " x"); a response without a colon is taken whole when shorter than
20 characters, else its last whitespace-separated word. Labels and users score by exact string match; the three
comparison phrases score 1 when the parsed phrase is in the gold; numeric answers get partial credit
0.75 ** |gold - answer| (both int()-parsed: "12.0" is a 0); dates match when dateutil parses them to the gold day.

Real (D&D): the answer is the first \\boxed{...} (or \\boxed{\\text{...}}) of the response, read as an int, a
comma-separated list or a string; without a box the whole response is a string. Ints: 0.75 ** |gold - answer|;
strings: equal after strip() and lower(); lists: the share of the gold's names present (case-sensitive, no
penalty for extras). Types that differ score 0.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

COMPARISONS = ("more common", "less common", "same frequency")
PARTIAL_BASE = 0.75  # numeric partial credit: PARTIAL_BASE ** |gold - answer|


@dataclass(frozen=True)
class Parsed:
    """A graded response: its score, what the parser read and how sure the official parser says it was."""

    score: float
    attempted_parse: str
    parse_confidence: str


def synth_parse(response: str, *, strip_markup: bool = False) -> tuple[str, str]:
    """(candidate answer, confidence) as the official synth parser reads it. strip_markup=True strips again after
    removing `*`, `[` and `]` (the code's comment says it handles bold answers; as run, "**Answer:** x" keeps a
    leading space and misses)."""
    if ":" not in response:
        words = response.split() or [""]  # the official code raises on 20+ characters of whitespace: read as ""
        return (response if len(response) < 20 else words[-1]), "low"
    candidate = response.split(":")[-1].strip()
    for mark in ("*", "[", "]"):
        candidate = candidate.replace(mark, "")
    if strip_markup:
        candidate = candidate.strip()
    confidence = "med"
    if any(tag in response for tag in ("User:", "Answer:", "Date:", "Label")):
        confidence = "high"
    if len(candidate) < 20:
        return candidate, "vhigh"
    return next((phrase for phrase in COMPARISONS if phrase in candidate), candidate), confidence


def synth_gold(answer: str) -> Any:
    """The gold of an official synth row: a datetime for "[datetime.date(Y, M, D)]", else the listed value."""
    if "datetime" in answer:
        return datetime.strptime(answer, "[datetime.date(%Y, %m, %d)]")
    return ast.literal_eval(answer)[0]


def synth_score(response: str, answer: str, answer_type: str, *, strip_markup: bool = False) -> Parsed:
    gold = synth_gold(answer)
    candidate, confidence = synth_parse(response, strip_markup=strip_markup)
    if str(candidate) == str(gold):
        return Parsed(1.0, candidate, confidence)
    if candidate in COMPARISONS:
        return Parsed(float(candidate in str(gold)), candidate, confidence)
    if answer_type == "ANSWER_TYPE.NUMERIC":
        try:
            return Parsed(PARTIAL_BASE ** abs(int(gold) - int(candidate)), candidate, confidence)
        except (ValueError, TypeError):
            return Parsed(0.0, candidate, "low")
    if answer_type == "ANSWER_TYPE.DATE":
        from dateutil import parser

        try:
            return Parsed(float(parser.parse(candidate) == gold), candidate, confidence)
        except (ValueError, OverflowError, TypeError):  # dateutil's ParserError is a ValueError
            return Parsed(0.0, candidate, "low")
    return Parsed(0.0, candidate, confidence)


def dnd_value(text: str) -> int | str | list[str]:
    """An official D&D answer (gold or boxed): an int, else a comma-separated list, else the string."""
    try:
        return int(text)
    except ValueError:
        pass
    if "," in text:
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


BOXED_TEXT = re.compile(r"\\boxed\{\\text\{([^}]*)\}\}")
BOXED = re.compile(r"\\boxed[\{]+([^}]*)[\}]+")


def dnd_parse(response: str) -> tuple[int | str | list[str], str]:
    match = BOXED_TEXT.search(response) or BOXED.search(response)
    if not match:
        return response, "low"
    return dnd_value(match.group(1)), "high"


def dnd_score(response: str, answer: str) -> Parsed:
    gold = dnd_value(str(answer))
    candidate, confidence = dnd_parse(response)
    score = 0.0
    if isinstance(gold, int) and isinstance(candidate, int):
        score = PARTIAL_BASE ** abs(gold - candidate)
    elif isinstance(gold, str) and isinstance(candidate, str):
        score = float(gold.strip().lower() == candidate.strip().lower())
    elif isinstance(gold, list) and isinstance(candidate, list):
        score = len(set(gold) & set(candidate)) / len(gold) if gold else 0.0
    shown = ", ".join(candidate) if isinstance(candidate, list) else str(candidate)
    return Parsed(float(score), shown, confidence)
