"""The opt-in LLM judge (`judge/qa`): another task's samples, scored by a model behind an OpenAI-compatible API with
HELMET's model-based protocol for long-document QA (Yen et al. 2025, princeton-nlp/HELMET, scripts/eval_gpt4_longqa.py).

`judge/qa` wraps a task (e.g. `longbench/narrativeqa`, `infinitebench/en_qa`): the same prompts, samples and model
answers; only the score differs. The answer is cut as HELMET cuts it (newlines to spaces, the text after "Answer:"
or else the whole), and the judge is asked HELMET's rubric (below, from HELMET, MIT licence) for fluency (0-1) and
correctness (0-3); the sample's score is fluency x correctness / 3 (HELMET averages fluency x correctness on 0-3).

The judge is any model an OpenAI-compatible server serves (the `openai` backend, chat API, with its retries and rate
limits), named by `model` and `version` (a dated snapshot, e.g. gpt-4o-2024-05-13) in every row's `judge` field and,
as task arguments, in the run record. Paid calls are guarded (harness/judge.py: planned calls and tokens printed,
`--judge-budget` enforced before the run), cached (cache_dir/judge/<model>.jsonl, keyed by the judge, its settings
and the exact prompt: a rerun, a resume or a --fresh re-score never pays twice for a verdict) and resumable: a judge
that fails (HTTP error, no readable verdict) makes the sample an error row that a rerun retries, never a 0.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Request, Sample
from ctxbench.tasks.base import Task, TaskArgs

# HELMET's QA judge prompt (scripts/eval_gpt4_longqa.py, MIT licence), verbatim; its own prompts credit
# https://www.databricks.com/blog/LLM-auto-eval-best-practices-RAG
QA_PROMPT = """Please act as an impartial judge and evaluate the quality of the provided answer which attempts to answer the provided question based on a provided context.
Although you are not given the context, you will be given a set of correct answers that achieves full scores on all metrics, and you need to assess the provided answers using the correct answers.

Below is your grading rubric:

Fluency:
- Score 0 (incoherent, repetitive, or incomplete): Incoherent sentences, repetitive sentences (even if not by exact words), incomplete answers, or gibberish. Note that even if the answer is coherent, if it is repetitive or incomplete, it should be given a score of 0.
- Score 1 (coherent, non-repetitive answer): Coherent, non-repetitive, fluent, grammatically correct answers.

Correctness:
- Score 0 (Incorrect): The answer does not agree with the provided correct answers at all.
- Score 1 (partly correct): Partly agree with one of the provided correct answers (for example, the question asks for a date and a person; the answer gets the date right but the person wrong).
- Score 2 (correct but not fully relevant): Fully agrees with one of the provided correct answers but mentions other completely irrelevant information. Note that extra details provided in the answer, even if not mentioned in the correct answers, should NOT be seen as irrelevant as long as they are relevant to the question to a reasonable extend.
- Score 3 (correct and relevant): Fully agrees with one of the provided correct answers and only provides information relevant to the question. Note that if the answer is longer than the correct answer, as long as everything in the answer is relevant to the question, it should still be given score 3. For example, if the correct answer is "the North Pole" and the answer is "They are headed for the North Pole", it should still be given a score of 3.

Now, read the following question, answer, and correct answers. First think step-by-step and provide your reasoning and assessment on the answer. Then output your score in the following json format: {{"fluency": 0, "correctness": 1}}.

Question: {question}
Correct answers: {correct_answers}
Answer: {parsed_output}
"""
CHARS_PER_TOKEN = 4  # the cost estimate's conversion (the judge's own tokenizer is not known here)
QUESTION_TOKENS = 128  # the cost estimate's allowance for a question and its reference answers


def parsed_answer(output: str, prefix: str = "Answer:") -> str:
    """HELMET's cut of a model's answer: newlines to spaces, the text after the first `prefix` (any case) else the
    whole, stripped, and a repeated prefix removed."""
    text = output.replace("\n", " ")
    found = re.search(f"{re.escape(prefix)}(.*)", text, flags=re.IGNORECASE)
    picked = (found.group(1) if found else text).strip()
    return re.sub(f"^{re.escape(prefix)}", "", picked, flags=re.IGNORECASE).strip()


def qa_verdict(text: str) -> dict[str, int] | None:
    """The judge's scores: the last {...} of its output as JSON, with fluency 0-1 and correctness 0-3; else None."""
    found = re.findall(r"\{.*?\}", text, re.DOTALL)
    try:
        scores = json.loads(found[-1]) if found else None
    except ValueError:
        return None
    if not isinstance(scores, dict) or scores.get("fluency") not in (0, 1) or scores.get("correctness") not in (0, 1, 2, 3):
        return None
    return {"fluency": int(scores["fluency"]), "correctness": int(scores["correctness"])}


class JudgeArgs(TaskArgs):
    task: str = Field("longbench/narrativeqa", description="the judged task: its prompts, samples and answers (e.g. longbench/narrativeqa)")
    task_args: dict[str, Any] = Field(default_factory=dict, description="the judged task's own arguments")
    model: str = Field("gpt-4o-2024-05-13", description="the judge model, as its OpenAI-compatible server names it (e.g. gpt-4o-2024-05-13)")
    version: str | None = Field(None, description="the judge's version as recorded in every row; default: model")
    base_url: str = Field("https://api.openai.com/v1", description="the judge's OpenAI-compatible root URL")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the judge's API key ('' for none)")
    backend_args: dict[str, Any] = Field(default_factory=dict, description="more openai backend arguments for the judge "
                                         "(concurrency, max_retries, rpm, timeout, tokenizer, context_length)")
    temperature: float = Field(0.1, ge=0, description="the judge's sampling temperature (HELMET: 0.1)")
    max_tokens: int = Field(1024, ge=1, description="tokens the judge may write (its reasoning and verdict)")
    question_field: str = Field("input", description="the judged task's record field holding the question")


class JudgeCache:
    """Verdicts already paid for, one JSON line each, shared by every run on this machine."""

    def __init__(self, model: str):
        from ctxbench.harness.core.io import slug
        from ctxbench.harness.core.models import cache_dir

        self.path = cache_dir("judge") / f"{slug(model, max_len=80)}.jsonl"
        self._entries: dict[str, dict[str, Any]] | None = None

    def get(self, key: str) -> dict[str, Any] | None:
        if self._entries is None:
            from ctxbench.harness.core.io import read_jsonl

            self._entries = {r["key"]: r for r in read_jsonl(self.path, require=("key",))} if self.path.exists() else {}
        return self._entries.get(key)

    def put(self, key: str, entry: dict[str, Any]) -> None:
        from filelock import FileLock

        from ctxbench.harness.core.io import append_jsonl, cut_torn_tail

        with FileLock(str(self.path) + ".lock"):
            cut_torn_tail(self.path)
            append_jsonl(self.path, [{"key": key, **entry}])
        if self._entries is not None:
            self._entries[key] = {"key": key, **entry}


class JudgedQA(Task):
    """Another task's samples, scored by an LLM judge with HELMET's QA protocol."""

    Args = JudgeArgs
    metric = "judge/qa"
    summary = "{name}: {task}'s answers scored by the LLM judge {model} with HELMET's QA rubric (fluency x correctness)"
    data_source = "the judged task's data; paid calls to the judge's server (--judge-budget)"

    def __init__(self, name: str, args: JudgeArgs):
        from ctxbench.harness.core.config import TaskSpec, build_task

        if args.task.startswith("judge/"):
            raise ConfigError(f"task: a judge judges an answering task, not {args.task}")
        self.inner = build_task(TaskSpec(task=args.task, args=args.task_args), where="args")
        super().__init__(f"{name}/{self.inner.name}", args)
        self.category, self.needs = self.inner.category, self.inner.needs
        self._client: Any = None
        self._cache: JudgeCache | None = None

    @property
    def max_new_tokens(self) -> int:
        return self.inner.max_new_tokens

    @property
    def paid_calls(self) -> tuple[int, int]:
        """(judge calls, tokens at most) per scored sample: the cost guard's unit (harness/judge.py)."""
        prompt = len(QA_PROMPT) // CHARS_PER_TOKEN + QUESTION_TOKENS + self.max_new_tokens
        return 1, prompt + self.args.max_tokens

    @property
    def version(self) -> str:
        return self.args.version or self.args.model

    def data_files(self, ctx: GenContext) -> list[Path]:
        return self.inner.data_files(ctx)

    def prepare(self, ctx: GenContext) -> None:
        self.inner.prepare(ctx)

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return self.inner.samples_per_length(ctx)

    def samples_at(self, length: int, ctx: GenContext) -> int | None:
        return self.inner.samples_at(length, ctx) if hasattr(self.inner, "samples_at") else None

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        s = self.inner.generate(length=length, index=index, seed=seed, ctx=ctx)
        question = s.meta.get("question")
        if question is None and hasattr(self.inner, "record"):
            question = self.inner.record(index, ctx).get(self.args.question_field)
        if question is None:
            raise ConfigError(f"question_field: {self.args.task}'s items have no field {self.args.question_field!r}; "
                              "name the field that holds the question")
        return dataclasses.replace(s, task=self.name, metric=self.metric, meta={**s.meta, "question": str(question)})

    def score(self, prediction: str, sample: Sample) -> float:
        score, _, error = self.score_row(prediction, sample)
        if error:
            raise RuntimeError(error)
        return float(score)

    def score_row(self, prediction: str, sample: Sample) -> tuple[float | None, dict[str, Any], str | None]:
        """(score, the row's `judge` field, error): a verdict from the cache, else one paid call; a failure is an
        error (the runner's error row, retried on rerun), never a 0."""
        prompt = QA_PROMPT.format(question=sample.meta["question"], correct_answers=str(list(sample.answers)),
                                  parsed_output=parsed_answer(prediction))
        key = self.cache_key(prompt)
        judge = {"model": self.args.model, "version": self.version, "protocol": "helmet-qa", "prompt_sha": key[:16]}
        hit = self.cache().get(key)
        if hit is None:
            p = self.client().generate([Request(sample.id, prompt, self.args.max_tokens, user_text=prompt,
                                                sampling=(("temperature", self.args.temperature),))])[0]
            if p.error:
                return None, {"judge": judge}, f"judge: {p.error}"
            if qa_verdict(p.text) is None:
                return None, {"judge": {**judge, "output": p.text}}, "judge: no readable verdict (fluency 0-1, correctness 0-3)"
            hit = {"output": p.text, "prompt_tokens": p.prompt_tokens, "completion_tokens": p.generated_tokens}
            self.cache().put(key, hit)
            judge["cached"] = False
        else:
            judge["cached"] = True
        verdict = qa_verdict(hit["output"]) or {}
        judge.update(verdict=verdict, output=hit["output"], prompt_tokens=hit.get("prompt_tokens"),
                     completion_tokens=hit.get("completion_tokens"))
        return verdict["fluency"] * verdict["correctness"] / 3, {"judge": judge}, None

    def cache_key(self, prompt: str) -> str:
        ident = {"model": self.args.model, "version": self.version, "protocol": "helmet-qa",
                 "temperature": self.args.temperature, "max_tokens": self.args.max_tokens, "prompt": prompt}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()

    def cache(self) -> JudgeCache:
        if self._cache is None:
            self._cache = JudgeCache(self.args.model)
        return self._cache

    def client(self) -> Any:
        """The judge's openai backend, built on the first paid call (a run whose verdicts are all cached builds none)."""
        if self._client is None:
            from ctxbench.harness.core import registry

            args = {"api": "chat", "prefill": "user", "base_url": self.args.base_url, "api_key_env": self.args.api_key_env,
                    "tokenizer": "smollm2-135m", "context_length": 131072, **self.args.backend_args}
            self._client = registry.get("backend", "openai")(model=self.args.model, **args)
        return self._client


@register("task", "judge/qa")
def judge_qa(**args):
    return JudgedQA("judge/qa", JudgeArgs(**args))
