"""AA-LCR's equality checker: the official prompt (the dataset card's, as NeMo-Skills' judge/aalcr.yaml sends it) and
the verdict read as NeMo-Skills' AALCRMetrics reads it (nemo_skills/evaluation/metrics/aalcr_metrics.py).

As it runs: the verdict is stripped and upper-cased, and is correct when it equals "CORRECT" or starts with it (so
"Correct." and "CORRECTNESS: INCORRECT" count as correct, "**CORRECT**" and "The answer is CORRECT" do not); an empty
or whitespace-only answer is incorrect whatever the verdict (its `generation_valid`). Every verdict is scored, none is
refused; one outside the card's two words is flagged. `verdict: exact` scores the card's stated intent instead ("Reply
only with CORRECT or INCORRECT"): correct only when the verdict is the word CORRECT (a final period allowed).
"""

from __future__ import annotations

from typing import Literal

JUDGE_PROMPT = """Assess whether the following CANDIDATE ANSWER is CORRECT or INCORRECT. For the CANDIDATE ANSWER to be correct, it must be consistent with the OFFICIAL ANSWER.

The question, for reference only: {question}
The OFFICIAL ANSWER: {official_answer}
CANDIDATE ANSWER TO ASSESS: {candidate_answer}

Reply only with CORRECT or INCORRECT."""

Parse = Literal["prefix", "exact"]


def judge_prompt(question: str, official_answer: str, candidate_answer: str) -> str:
    """The equality checker's one user message (the bare question, not the documents)."""
    return JUDGE_PROMPT.format(question=question, official_answer=official_answer, candidate_answer=candidate_answer)


def answered(prediction: str) -> bool:
    """NeMo-Skills' generation_valid: an answer with something besides whitespace."""
    return len(prediction.strip()) > 0


def is_correct(verdict: str | None, parse: Parse = "prefix") -> bool:
    """The verdict read as NeMo-Skills reads it (prefix), or as the card's prompt asks for it (exact)."""
    if verdict is None:
        return False
    word = verdict.strip().upper()
    if parse == "exact":
        return word.removesuffix(".") == "CORRECT"
    return word == "CORRECT" or word.startswith("CORRECT")


def off_protocol(verdict: str) -> list[str]:
    """A flag when the judge replied other than the card's two words."""
    word = verdict.strip().upper().removesuffix(".")
    return [] if word in ("CORRECT", "INCORRECT") else [f"verdict {verdict.strip()[:80]!r} is not CORRECT or INCORRECT"]
