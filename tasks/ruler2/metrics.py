"""RULER v2's scoring, as NeMo-Skills runs it (branch chsieh/ruler2, commit 991a7432).

The pipeline a generation goes through there: `remove_thinking` (evaluate_results.py: the text after the last
</think>, stripped; an opened <think> never closed leaves nothing), then the task's evaluator:

- `ruler2` (evaluator/ruler.py `eval_ruler2`): the text after the last "</think>", then after the last "Answer:";
  each reference scores max(1 if it is a case-insensitive substring, 1 - WER(prediction, reference)), where WER is
  the word-level edit distance over the reference's word count (whitespace split, lower-cased). `all` averages over
  the references, `part` takes the best one after removing copied "Document N:" blocks, `2steps` scores only the
  last blank-line-separated paragraph as `all` does.
- `multichoice` (evaluator/mcq.py): the letter in the last \\boxed{...} (or, when the box holds more than one
  character, its last standalone letter A-J), else the last "Answer: X"; 1 if it equals the reference.

Shortcuts that cannot change a score: a substring match is 1 whatever the WER, and a length difference of at least
the reference's word count makes 1 - WER <= 0, so the edit distance is computed only where it can matter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxbench.harness.core.registry import register

_DOCUMENT_BLOCK = re.compile(r"Document \d+:(?:.*\n)+?\n")
_LAST_LETTER = re.compile(r"\b[A-J]\b(?!.*\b[A-J]\b)", re.DOTALL)
_ANSWER_LETTER = re.compile(r"(?i)[\*\_]{0,2}Answer[\*\_]{0,2}\s*:[\s\*\_]{0,2}\s*([A-Z])(?![a-zA-Z0-9])")


def remove_thinking(generation: str) -> str:
    """NeMo-Skills' evaluate_results step: after the last </think> (stripped); an unclosed <think> leaves ''."""
    if "</think>" in generation:
        return generation.split("</think>")[-1].strip()
    if "<think>" in generation:
        return ""
    return generation


def _after_answer(prediction: str) -> str:
    """eval_ruler2's post_process_preds: after the last </think>, then after the last 'Answer:'."""
    if "</think>" in prediction:
        prediction = prediction.split("</think>")[-1]
    if "Answer:" in prediction:
        prediction = prediction.split("Answer:")[-1]
    return prediction


def word_edit_distance(hyp: list[str], ref: list[str]) -> int:
    """Levenshtein distance over words (what editdistance.eval computes on two lists)."""
    if len(hyp) < len(ref):
        hyp, ref = ref, hyp
    previous = list(range(len(ref) + 1))
    for i, h in enumerate(hyp, 1):
        current = [i]
        for j, r in enumerate(ref, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (h != r)))
        previous = current
    return previous[-1]


def _reference_score(pred: str, ref: str) -> float:
    """max(substring hit, 1 - WER) of one lower-cased reference."""
    pred, ref = pred.lower(), ref.lower()
    if ref in pred:
        return 1.0
    h, r = pred.split(), ref.split()
    if not r:
        return 0.0  # the official WER is inf: 1 - inf never beats the 0 of a miss
    if abs(len(h) - len(r)) >= len(r):
        return 0.0  # the distance is at least the length difference: 1 - WER <= 0
    return max(0.0, 1.0 - word_edit_distance(h, r) / len(r))


def _references(references: Sequence[str]) -> list[str]:
    if not references:
        raise ValueError("RULER v2 scoring needs at least one reference")
    return [str(r) for r in references]


@register("metric", "ruler2/all")
def match_all(prediction: str, references: Sequence[str]) -> float:
    """eval_ruler2 match_type=all: the mean over references of max(substring, 1 - WER)."""
    refs = _references(references)
    pred = _after_answer(remove_thinking(prediction))
    return sum(_reference_score(pred, r) for r in refs) / len(refs)


@register("metric", "ruler2/2steps")
def match_2steps(prediction: str, references: Sequence[str]) -> float:
    """eval_ruler2 match_type=2steps: `all` on the last blank-line-separated paragraph only."""
    refs = _references(references)
    pred = _after_answer(remove_thinking(prediction)).split("\n\n")[-1]
    return sum(_reference_score(pred, r) for r in refs) / len(refs)


@register("metric", "ruler2/part")
def match_part(prediction: str, references: Sequence[str]) -> float:
    """eval_ruler2 match_type=part: the best reference, after removing copied 'Document N:' blocks."""
    refs = _references(references)
    pred = _DOCUMENT_BLOCK.sub("", _after_answer(remove_thinking(prediction)))
    return max(_reference_score(pred, r) for r in refs)


def boxed(text: str) -> str | None:
    """math_grader.extract_answer: the content of the last \\boxed{...} with balanced braces, else None."""
    idx = text.rfind("\\boxed")
    if idx < 0:
        return None
    depth = 0
    for i in range(idx, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                found = text[idx:i + 1]
                return found[len("\\boxed{"):-1] if found.startswith("\\boxed{") else None
    return None


def choice_letter(generation: str) -> str | None:
    """eval_mcq's extract_letter: the boxed letter (its last standalone A-J if longer), else the last 'Answer: X'."""
    parsed = boxed(generation)
    if parsed is not None and len(parsed) != 1:
        found = _LAST_LETTER.findall(parsed)
        if found:
            parsed = found[-1].strip()
    if parsed is None:
        found = _ANSWER_LETTER.findall(generation)
        if found:
            parsed = found[-1].strip()
    return parsed


@register("metric", "ruler2/mcq")
def multichoice(prediction: str, references: Sequence[str]) -> float:
    """eval_type=multichoice: 1 if the extracted letter is the reference letter."""
    refs = _references(references)
    return float(choice_letter(remove_thinking(prediction)) == refs[0])
