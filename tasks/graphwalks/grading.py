"""GraphWalks graders: set F1 of the node list on the answer's last line, as each official implementation computes it.

`card` (the default) is the extraction and grading of the openai/graphwalks dataset card at the pinned revision
(tasks/graphwalks/items.py REVISION), the code OpenAI states it grades with:

- the last line is `response.split("\\n")[-1]`: nothing is stripped, so a trailing newline leaves an empty last line;
- that line must contain "Final Answer:" (case-sensitive), else the answer is unparsed;
- the list is the greedy `[...]` span of that line (first "[" to last "]", wherever they are), its brackets stripped,
  split on commas, each item whitespace-stripped, empty items dropped; no "[...]" on the line is unparsed;
- unparsed scores 0; an empty prediction on an empty gold set scores 1; otherwise the F1 of the two SETS (duplicates
  count once; no overlap is 0).

`lmeval` is lm-evaluation-harness's `f1` (lm_eval/tasks/graphwalks/utils.py): trailing newlines are dropped before the
last line is taken, the list is the text between "Final Answer:" and the last "]" on that line, items lose quotes
around them, and an empty gold set always scores 0 (recall is 0 when nothing is gold). `lmeval-flexible` is its
`flexible_f1`: the last line anywhere in the response that holds "Final Answer: [...]", not only the very last one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

Grader = Literal["card", "lmeval", "lmeval-flexible"]
GRADERS: tuple[str, ...] = ("card", "lmeval", "lmeval-flexible")

_CARD_SPAN = re.compile(r"\[.*\]")
_LMEVAL_SPAN = re.compile(r"Final Answer:\s*\[(.*)\]")
_MARK = "Final Answer:"


def card_nodes(response: str) -> list[str] | None:
    """The dataset card's extraction: the node list of the very last line, or None when unparsed."""
    line = response.split("\n")[-1]
    if _MARK not in line:
        return None
    span = _CARD_SPAN.search(line)
    if span is None:
        return None
    return [part.strip() for part in span.group(0).strip("[]").split(",") if part.strip()]


def _lmeval_items(inside: str) -> list[str]:
    if not inside.strip():
        return []
    return [part.strip().strip("'\"") for part in inside.split(",") if part.strip()]


def lmeval_nodes(response: str, *, flexible: bool = False) -> list[str] | None:
    """lm-eval's extraction (strict: the last line after trailing newlines; flexible: the last line that matches)."""
    lines = response.rstrip("\n").split("\n")
    if not flexible:
        if _MARK not in lines[-1]:
            return None
        lines = lines[-1:]
    for line in reversed(lines):
        found = _LMEVAL_SPAN.search(line)
        if found:
            return _lmeval_items(found.group(1))
    return None


def set_f1(predicted: Iterable[str], gold: Iterable[str], *, empty_match: bool) -> float:
    """F1 of the two sets; `empty_match`: both empty scores 1 (the card) rather than 0 (lm-eval)."""
    sampled, truth = set(predicted), set(gold)
    if empty_match and not sampled and not truth:
        return 1.0
    overlap = len(sampled & truth)
    recall = overlap / len(truth) if truth else 0.0
    precision = overlap / len(sampled) if sampled else 0.0
    return 2 * recall * precision / (recall + precision) if recall + precision > 0 else 0.0


def grade(response: str, gold: Iterable[str], grader: str = "card") -> float:
    """The score of one response against the gold node list, under the named grader."""
    if grader == "card":
        nodes = card_nodes(response)
    elif grader in ("lmeval", "lmeval-flexible"):
        nodes = lmeval_nodes(response, flexible=grader == "lmeval-flexible")
    else:
        raise ValueError(f"grader: unknown {grader!r}; one of {', '.join(GRADERS)}")
    if nodes is None:
        return 0.0
    return float(set_f1(nodes, gold, empty_match=grader == "card"))
