"""Scoring one batch: the backend's requests, the thinking split, a sample's row, and perplexity's log-prob rows.

Every schedule scores through here (harness/run/loop.py), so a row is built one way whichever schedule asked for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ctxbench.harness.core.metrics import is_empty
from ctxbench.harness.core.reasoning import UNFINISHED, opened_in_prompt
from ctxbench.harness.core.rows import Row
from ctxbench.harness.core.types import Generation, Prediction, Request, Sample, TokenLogprobs, repeat_id


def chunks(items: Iterable[Sample], size: int) -> Iterator[list[Sample]]:
    buf: list[Sample] = []
    for item in items:
        buf.append(item)
        if len(buf) >= size:
            yield buf
            buf = []
    if buf:
        yield buf


def request(s: Sample, gen: Generation = Generation(), template_kwargs: dict[str, Any] | None = None,
            repeat: int = 0) -> Request:
    return Request(repeat_id(s.id, repeat), s.prompt, s.max_new_tokens, s.add_special_tokens, s.prompt_tokens, s.user_text, s.answer_prefix,
                   thinking=gen.on, max_thinking_tokens=gen.thinking_budget, system_prompt=gen.system_prompt,
                   sampling=gen.gen_kwargs, repeat=repeat, turns=s.turns, shared_prefix=s.shared_prefix, template_kwargs=tuple(sorted((template_kwargs or {}).items())))


def generated_rows(asks: list[tuple[Any, Sample, int]], backend: Any, gen: Generation,
                   template_kwargs: dict[str, Any] | None, tokenizer: Any, spend: Any = None) -> list[Row]:
    """One backend call for the (task, sample, repeat) asks, and each answer's row; with the run's meter
    (harness/run/cost_guard.py Spend), priced, and refused before the call once the run's ceiling is reached."""
    if spend is not None:
        spend.check()  # the batch before this one reached --max-cost/--max-tokens: stop, resumable
    preds = backend.generate([request(s, gen, template_kwargs, r) for _, s, r in asks])
    rows = [sample_row(task, s, p, gen, tokenizer, r) for (task, s, r), p in zip(asks, preds)]
    return rows if spend is None else spend.priced(rows)


def logprob_rows(task, batch: list[Sample], backend) -> list[Row]:
    """Perplexity rows: every window of the batch's samples in one call, then each sample's sums and buckets."""
    windows = [task.logprob_requests(s) for s in batch]
    results = iter(backend.token_logprobs([w for ws in windows for w in ws]))
    rows = []
    for s, ws in zip(batch, windows):
        got: list[TokenLogprobs] = [next(results) for _ in ws]
        error = next((r.error for r in got if r.error), None)
        scored = {} if error else dict(task.score_logprobs(s, got))
        rows.append(Row(id=s.id, task=s.task, category=task.category, length=s.length, index=s.index,
                        prompt_hash=s.prompt_hash, prompt_tokens=s.prompt_tokens, seconds=round(sum(r.seconds for r in got), 4),
                        metric=s.metric, score=scored.pop("score", None), error=error, cluster=s.meta.get("cluster"),
                        meta={k: v for k, v in s.meta.items() if k not in ("token_ids", "cluster")},
                        extra={"windows": len(ws), **scored}))
    return rows


def thinking_split(task, s: Sample, p: Prediction, tokenizer: Any) -> tuple[str, bool, dict[str, Any]]:
    """Thinking mode: (the answer, whether the reasoning closed, the row's reasoning fields). The reasoning is
    stripped before scoring, as the task splits it (Task.split_thinking), and stored beside the answer with its
    token count: the backend's own count, else every generated token for a block that never closed, else the
    model's tokenizer on the reasoning as written (delimiters included). A block that never closed is a failed
    sample (`failure: thinking_unfinished`): it counts 0 in its cell's denominator, its text is never scored, and a
    rerun does not retry it."""
    split = task.split_thinking(p.text, s, api_reasoning=p.reasoning, opened=opened_in_prompt(s.prompt))
    tokens = p.reasoning_tokens
    if not split.reasoning:  # none shown: a server's count of hidden reasoning (billed), else none
        tokens = (p.reasoning_tokens or 0) if p.token_source == "server" and p.reasoning is None else 0
    elif tokens is None and not split.finished and split.form != "api":
        tokens = p.generated_tokens
    elif tokens is None:
        tokens = len(tokenizer(split.reasoning, add_special_tokens=False)["input_ids"])
    fields = {"reasoning": split.reasoning, "reasoning_tokens": int(tokens), "reasoning_format": split.form,
              "answer_tokens": max(p.generated_tokens - int(tokens), 0)}
    return split.answer, split.finished, fields if split.finished else {**fields, "failure": UNFINISHED}


def sample_row(task, s: Sample, p: Prediction, gen: Generation = Generation(), tokenizer: Any = None,
               repeat: int = 0) -> Row:
    """A sample's row; in thinking mode the reasoning is split off first (thinking_split) and only the answer is
    scored. A task that scores through a paid judge (score_row) may fail: the sample is then an error row that a
    rerun retries, never a 0."""
    answer, finished, thinking = thinking_split(task, s, p, tokenizer) if gen.on and not p.error else (p.text, True, {})
    reasoning_tokens = thinking.pop("reasoning_tokens", p.reasoning_tokens)  # a row field since row version 3
    score, judged, failed = (None, {}, None) if p.error else task.score_row(answer, s) if finished else (0.0, {}, None)
    return Row(
        id=repeat_id(s.id, repeat), task=s.task, category=task.category, length=s.length, index=s.index,
        depths=s.depths, prompt_hash=s.prompt_hash, prompt_tokens=p.prompt_tokens or s.prompt_tokens,
        max_new_tokens=s.max_new_tokens, prediction=answer, generated_tokens=p.generated_tokens,
        seconds=round(p.seconds, 4), metric=s.metric, score=score, empty=is_empty(answer), answers=s.answers,
        truncated_tokens=p.truncated_tokens, error=p.error or failed, depth=s.meta.get("depth"),
        cached_tokens=p.cached_tokens, reasoning_tokens=reasoning_tokens, token_source=p.token_source,
        gpu_seconds=None if p.gpu_seconds is None else round(p.gpu_seconds, 4),
        position=s.meta.get("position"),
        cluster=s.meta.get("cluster"),  # samples sharing a haystack or document (None: independent); stats.py
        meta={k: v for k, v in s.meta.items() if k not in ("depth", "position", "user_text", "cluster")},
        extra={
            "timing": p.timing,
            "prefill_seconds": None if p.prefill_seconds is None else round(p.prefill_seconds, 4),
            "decode_seconds": None if p.decode_seconds is None else round(p.decode_seconds, 4),
            **thinking,  # reasoning, reasoning_format, answer_tokens, failure (docs/thinking.md)
            **({"repeat": repeat} if gen.repeats > 1 else {}),  # which generation of the sample (--repeats)
            **({"over_budget": p.over_budget} if p.over_budget else {}),  # a server ignored max_tokens: cut to it
            **judged,  # an LLM judge's model, version and verdict (tasks/judge/task.py)
        })
