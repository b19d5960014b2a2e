"""The LLM judge's verdicts read and scored as HELMET's scripts run them (princeton-nlp/HELMET at commit 4526dfb:
scripts/eval_gpt4_longqa.py and scripts/eval_gpt4_summ.py), written anew from their behaviour.

A verdict the official script scores is accepted and scored as it scores it, whatever its range (a correctness of 4,
fractions, negatives, booleans, recall above the number of key points); what lies outside the rubric is flagged.
A verdict the official script does not score (it skips the sample, or it crashes: a missing key, a string where a
number is divided) is `Refused`, with the reason. One deliberate difference: a non-finite number (JSON's NaN or
Infinity, which Python's json reads) is refused, where the official mean would become NaN or infinite.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

QA_RUBRIC = {"fluency": (0, 1), "correctness": (0, 1, 2, 3)}


class Refused(ValueError):
    """A verdict HELMET's script would not score (it skips or crashes on it)."""


def last_object(text: str) -> Any:
    """The QA script's parse_json: the last non-greedy {...} of the output as JSON; None when absent or unreadable."""
    found = re.findall(r"\{.*?\}", text, re.DOTALL)
    if not found:
        return None
    try:
        return json.loads(found[-1])
    except ValueError:
        return None


def summary_object(text: str) -> Any:
    """The summary script's parse_json: as last_object, but an unreadable last {...} falls back to the (greedy)
    ```json block; no {...} at all is None even when a block exists. Any JSON value may come back."""
    if not re.findall(r"\{.*?\}", text, re.DOTALL):
        return None
    parsed = last_object(text)  # a readable {...} is always an object
    if parsed is not None:
        return parsed
    blocks = re.findall(r"(?:```json)(.+)(?:```)", text, re.DOTALL)
    try:
        return json.loads(blocks[-1]) if blocks else None
    except ValueError:
        return None


def is_number(value: Any) -> bool:
    """What the scripts' arithmetic takes (bool is an int in Python)."""
    return isinstance(value, (bool, int, float))


def _finite(name: str, value: Any) -> float:
    try:
        number = float(value)
    except OverflowError:
        raise Refused(f"{name} {value!r} is too large for a float (the official mean fails on it)") from None
    if not math.isfinite(number):
        raise Refused(f"{name} is {value!r}: not finite (the official mean would be {value!r}; ctxbench refuses it)")
    return number


def _field(verdict: Any, key: str, what: str) -> Any:
    if not isinstance(verdict, dict):
        raise Refused(f"{what}: no readable JSON object (HELMET skips the sample)" if verdict is None else
                      f"{what}: the verdict is {type(verdict).__name__}, not an object (the official script crashes)")
    if key not in verdict:
        raise Refused(f"{what}: no {key!r} in the verdict (the official script crashes on it)")
    return verdict[key]


def _number(verdict: Any, key: str, what: str) -> Any:
    value = _field(verdict, key, what)
    if not is_number(value):
        raise Refused(f"{what}: {key} is {value!r}, not a number (the official script crashes on it)")
    _finite(key, value)
    return value


def outside(name: str, value: Any, allowed: tuple) -> list[str]:
    """A flag when a value lies outside the rubric (Python's `in`: 1.0 and True count as 1, as in the scripts)."""
    return [] if value in allowed else [f"{name} {value!r} outside the rubric ({', '.join(map(str, allowed))})"]


def qa_values(text: str) -> dict[str, Any]:
    """The QA judge's {fluency, correctness} as written (numbers of any range); Refused where the script skips or
    crashes: no readable object (skipped), a key missing or a value that is not a number (crash)."""
    verdict = last_object(text)
    values = {key: _number(verdict, key, "qa verdict") for key in ("fluency", "correctness")}
    _finite("fluency x correctness", values["fluency"] * values["correctness"])
    return values


def qa_score(values: dict[str, Any]) -> tuple[float, list[str]]:
    """(HELMET's fluency x correctness, on ctxbench's 0..1 scale: / 3; the out-of-rubric flags)."""
    flags = [flag for key, allowed in QA_RUBRIC.items() for flag in outside(key, values[key], allowed)]
    return float(values["fluency"] * values["correctness"]) / 3, flags


def summary_values(call: int, text: str, keypoints: int) -> dict[str, Any]:
    """Call `call`'s values (0 fluency, 1 recall, 2 precision and sentence_count), as the summary script takes
    them: a value it never does arithmetic on may be anything (recall with no key points, precision when
    sentence_count <= 0), but its key must be there; Refused otherwise."""
    verdict, what = summary_object(text), ("fluency", "recall", "precision")[call] + " verdict"
    if call == 0:
        return {"fluency": _number(verdict, "fluency", what)}
    if call == 1:
        return {"recall": _number(verdict, "recall", what) if keypoints > 0 else _field(verdict, "recall", what)}
    count = _number(verdict, "sentence_count", what)
    precision = _number(verdict, "precision", what) if count > 0 else _field(verdict, "precision", what)
    return {"precision": precision, "sentence_count": count}


def summary_score(values: list[dict[str, Any]], keypoints: int) -> tuple[float, dict[str, float], list[str]]:
    """(HELMET's fluency x F1 of recall and precision, uncapped; recall and precision; the flags). Recall is found /
    key points (0 without key points), precision supported / sentence_count (0 when that is <= 0)."""
    fluency, found = values[0]["fluency"], values[1]["recall"]
    supported, count = values[2]["precision"], values[2]["sentence_count"]
    recall = found / keypoints if keypoints > 0 else 0
    precision = supported / count if count > 0 else 0
    f1 = fluency * 2 * (recall * precision) / (recall + precision) if recall + precision > 0 else 0
    score = _finite("the summary score", f1)
    flags = outside("fluency", fluency, (0, 1))
    if keypoints > 0 and not 0 <= found <= keypoints:
        flags.append(f"recall {found!r} outside 0..{keypoints} key points")
    if count <= 0:
        flags.append(f"sentence_count {count!r} is not positive (precision taken as 0)")
    elif not 0 <= supported <= count:
        flags.append(f"precision {supported!r} outside 0..{count!r} sentences")
    return score, {"recall": float(recall), "precision": float(precision)}, flags
