"""Reasoning apart from the answer: what a thinking model wrote before its answer is stripped before scoring and
kept in the store beside it.

The formats a model (or server) uses:
- `<think>…</think>answer` (Qwen3, DeepSeek-R1 distills, Nemotron);
- a block the chat template opened: the prompt ends inside `<think>`, so the output is `…</think>answer`;
- gpt-oss channels: `<|channel|>analysis<|message|>…<|end|>` … `<|channel|>final<|message|>answer`;
- an API's separate field (`reasoning_content`, `reasoning`): the content is the answer.

A block that never closes (no `</think>`, an analysis channel without a final one, or an API answer with reasoning
and no content) is unfinished: the sample fails with the reason `thinking_unfinished` and its text is never scored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN, CLOSE = "<think>", "</think>"
CHANNEL = "<|channel|>"
FINAL = re.compile(r"<\|channel\|>\s*final\s*(?:<\|constrain\|>\S*)?\s*<\|message\|>")
CHANNEL_END = re.compile(r"<\|(?:end|return|call)\|>")
UNFINISHED = "thinking_unfinished"


@dataclass(frozen=True)
class Split:
    answer: str  # what is scored
    reasoning: str  # the reasoning text as the model wrote it (delimiters included), "" if none
    finished: bool  # False: the reasoning never closed, so there is no answer to score
    form: str  # "think", "opened", "channel", "api" or "none"


def opened_in_prompt(prompt: str) -> bool:
    """Whether the prompt (its chat template) ends inside a think block: the output starts with reasoning."""
    return prompt.rfind(OPEN) > prompt.rfind(CLOSE)


def split_reasoning(text: str, *, api_reasoning: str | None = None, opened: bool = False) -> Split:
    """The answer and the reasoning of one generation in thinking mode (see the module docstring for the formats)."""
    if api_reasoning:
        return Split(text.strip(), api_reasoning, bool(text.strip()), "api")
    if CHANNEL in text:
        return _channels(text)
    close = text.find(CLOSE)
    start = text.find(OPEN)
    if 0 <= start and (close < 0 or start < close):  # the model opened its block
        if close < 0:
            return Split("", text, False, "think")
        end = close + len(CLOSE)
        return Split(text[end:].strip(), text[:end], True, "think")
    if close >= 0:  # the template opened it (whether or not the prompt shows it)
        end = close + len(CLOSE)
        return Split(text[end:].strip(), text[:end], True, "opened")
    if opened:
        return Split("", text, False, "opened")
    return Split(text.strip(), "", True, "none")


def _channels(text: str) -> Split:
    """gpt-oss's harmony format: every channel before the final one is reasoning."""
    final = FINAL.search(text)
    if final is None:
        return Split("", text, False, "channel")
    answer = CHANNEL_END.split(text[final.end():], maxsplit=1)[0]
    return Split(answer.strip(), text[: final.end()], True, "channel")
