"""What the OpenAI-compatible backend accepts back from a server it does not trust.

Every (chat) completion, /tokenize and prompt-logprobs reply is validated against a pydantic model of the fields
ctxbench reads, before any of it is used: a wrong shape (`{"choices": ["oops"]}`, `usage: [1]`, `message` as a
string), a count that is not a finite non-negative integer (`"completion_tokens": Infinity`) or a log-probability
that is not a finite number raises `MalformedReply`, which the transport retries like any unreadable answer and
which finally becomes that sample's error row. Nothing of a reply's other fields is read.

An answer longer than the request's generation budget (a server that ignores `max_tokens`) is cut to the budget by
the local tokenizer and flagged (`Answer.over_budget`: the characters the server sent). Only the first
`CHARS_PER_TOKEN` characters per token of budget are ever tokenized, so a 10 MB answer costs no more than a full one;
an answer longer than that bound counts as over the budget whatever its token count.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

CHARS_PER_TOKEN = 32  # no real answer averages more characters per token; beyond it an answer is over its budget
MAX_COUNT = 2 ** 31 - 1  # a token count above this is no count
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
# a server that sends no count is over its budget only when the local count exceeds it by more than this (tokenizing
# a cut answer again can merge tokens differently at the cut, and a local tokenizer may not be the server's)
LOCAL_SLACK = 8


class MalformedReply(ValueError):
    """A reply that is well-formed JSON but not of the shape ctxbench reads (one line, names the field)."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Details(_Lenient):
    reasoning_tokens: Count | None = None


class _PromptDetails(_Lenient):
    cached_tokens: Count | None = None


class _Usage(_Lenient):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    completion_tokens_details: _Details | None = None
    prompt_tokens_details: _PromptDetails | None = None


class _Message(_Lenient):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: Any = None  # some APIs send an object here; only a string is read


class _Choice(_Lenient):
    text: str | None = None  # completions
    message: _Message | None = None  # chat


class _Completion(_Lenient):
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


class _Tokenized(_Lenient):
    count: Count
    tokens: list[int] | None = None


class _Logprobs(_Lenient):
    token_logprobs: list[float | None]


class _LogprobChoice(_Lenient):
    logprobs: _Logprobs


class _LogprobReply(_Lenient):
    choices: list[_LogprobChoice] = Field(min_length=1)


def _validated(model: type[_Lenient], data: Any, what: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "reply"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise MalformedReply(f"malformed {what}: {where}: {first['msg']}{more}") from None


@dataclass(frozen=True)
class Answer:
    """A completion as read: the text, the server's counts (None where it gave none) and the reasoning apart."""

    text: str
    completion_tokens: int | None
    prompt_tokens: int | None
    reasoning: str | None
    reasoning_tokens: int | None
    over_budget: int = 0  # characters the server sent when it ignored the budget (0: within it)
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (None: not reported)
    usage_reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens, reasoning shown or not


def parse_completion(data: Any, api: str) -> Answer:
    """The answer of a (chat) completion reply; reasoning is what the server returned apart (vLLM/SGLang
    `reasoning_content`, others `reasoning`). Raises MalformedReply for any other shape."""
    reply = _validated(_Completion, data, "completion response")
    choice, usage = reply.choices[0], reply.usage or _Usage()
    reasoning = None
    if api == "chat":
        message = choice.message or _Message()
        text = message.content
        reasoning = message.reasoning_content or message.reasoning
    else:
        text = choice.text
    reasoning = reasoning if isinstance(reasoning, str) else None
    details = usage.completion_tokens_details or _Details()
    cached = (usage.prompt_tokens_details or _PromptDetails()).cached_tokens
    return Answer(text or "", usage.completion_tokens, usage.prompt_tokens, reasoning,
                  details.reasoning_tokens if reasoning else None, cached_tokens=cached,
                  usage_reasoning_tokens=details.reasoning_tokens)


def token_account(sent: Answer, kept: Answer) -> dict[str, Any]:
    """A prediction's token account (harness/core/rows.py): the server's counts win where it gave both and the answer
    was kept as sent (`token_source` "server"); an answer cut or counted here is "counted". Reasoning the server
    returned apart counts as kept; else the usage report's reasoning tokens (hidden reasoning, which a reasoning model
    bills, or reasoning inline in the text) where the counts are the server's."""
    server = (sent.prompt_tokens is not None and sent.completion_tokens is not None and not kept.over_budget
              and kept.completion_tokens == sent.completion_tokens)
    reasoning = kept.reasoning_tokens if kept.reasoning is not None else sent.usage_reasoning_tokens if server else None
    return {"cached_tokens": sent.cached_tokens, "token_source": "server" if server else "counted",
            "reasoning_tokens": reasoning}


def parse_tokenized(data: Any) -> tuple[int, list[int] | None]:
    """(count, ids if sent) of a /tokenize reply."""
    reply = _validated(_Tokenized, data, "/tokenize response")
    return reply.count, reply.tokens


def parse_prompt_logprobs(data: Any, needed: int) -> list[float | None] | None:
    """The echoed prompt's token log-probabilities (None: the server echoed none, or fewer than `needed`); a value that
    is not a finite number is a malformed reply."""
    try:
        found = data["choices"][0]["logprobs"]["token_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(found, list) or len(found) < needed:
        return None
    values = _validated(_LogprobReply, data, "logprobs response").choices[0].logprobs.token_logprobs
    if any(v is None or not math.isfinite(v) for v in values[1:needed]):  # only the first token has no log-probability
        raise MalformedReply("malformed logprobs response: choices.0.logprobs.token_logprobs: not a finite number")
    return values


def within_budget(answer: Answer, budget: int, tokenizer: Any) -> Answer:
    """The answer cut to `budget` tokens when the server sent more (its own count over the budget, a local count over
    it by more than LOCAL_SLACK, or more than CHARS_PER_TOKEN characters a token), with `over_budget` set."""
    sent = len(answer.text) + len(answer.reasoning or "")
    bound = budget * CHARS_PER_TOKEN
    claimed = answer.completion_tokens
    if sent <= bound and (claimed is not None and claimed <= budget):
        return answer  # the server's own count is within budget: nothing to tokenize
    reasoning_ids = _ids(tokenizer, (answer.reasoning or "")[:bound])
    text_ids = _ids(tokenizer, answer.text[:bound])
    local = len(reasoning_ids) + len(text_ids)
    if sent <= bound and (claimed is None or claimed <= budget) and local <= budget + LOCAL_SLACK:
        return answer if claimed is not None else dataclasses.replace(answer, completion_tokens=local)
    # generation order: the reasoning first, then the answer in what budget is left
    kept_reasoning = reasoning_ids[:budget]
    kept_text = text_ids[: budget - len(kept_reasoning)]
    reasoning = answer.reasoning
    if reasoning is not None and (len(kept_reasoning) < len(reasoning_ids) or len(reasoning) > bound):
        reasoning = tokenizer.decode(kept_reasoning)
    text = answer.text
    if len(kept_text) < len(text_ids) or len(text) > bound:
        text = tokenizer.decode(kept_text)
    reasoning_tokens = None if answer.reasoning_tokens is None else min(answer.reasoning_tokens, len(kept_reasoning))
    return Answer(text, len(kept_reasoning) + len(kept_text), answer.prompt_tokens, reasoning, reasoning_tokens,
                  over_budget=sent, cached_tokens=answer.cached_tokens)


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
