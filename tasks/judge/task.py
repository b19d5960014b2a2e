"""The opt-in LLM judge (`judge/qa`, `judge/summary`): another task's samples, scored by a model behind an
OpenAI-compatible API with HELMET's model-based protocols (Yen et al. 2025, princeton-nlp/HELMET at 4526dfb):
long-document QA (scripts/eval_gpt4_longqa.py) and summarisation (scripts/eval_gpt4_summ.py: fluency x F1 of
key-point recall and sentence precision, three calls per sample; its prompts are in tasks/judge/prompts.py).

`judge/qa` wraps a task (e.g. `longbench/narrativeqa`, `infinitebench/en_qa`): the same prompts, samples and model
answers; only the score differs. The answer is cut as HELMET cuts it (newlines to spaces, the text after "Answer:"
or else the whole), and the judge is asked HELMET's rubric (below, from HELMET, MIT licence) for fluency and
correctness; the sample's score is fluency x correctness / 3 (HELMET averages fluency x correctness on 0-3).

The judge runs with HELMET's settings (temperature 0.1, top_p 0.9, seed 42, 2,048 tokens for QA and 4,096 for a
summary, no system message); they are task arguments, so part of the run's identity and of every verdict's cache
key. Verdicts are read and scored as HELMET's scripts do (tasks/judge/verdicts.py): every verdict they score is
scored the same, out-of-rubric values flagged in the row's `judge` field; a row's score is that number clipped to
the board's 0..1 scale, the unclipped one kept as `judge.official_score`.

Paid calls are guarded (harness/run/judge_budget.py: planned calls and tokens printed, `--judge-budget` enforced before the run
and against real use while it goes, tasks/judge/cache.py), cached (keyed by the judge, its settings and the exact
prompt: a rerun, a resume or a --fresh re-score never pays twice for a verdict) and resumable: a judge that fails
(unreachable, refused credentials, HTTP error, a prompt over its context, a verdict HELMET would not score) makes
the sample an error row that a rerun retries, never a 0 and never a stopped run. An answer far over its token
budget is cut before it reaches the judge (at MAX_CHARS_PER_TOKEN characters a token), and flagged.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from ctxbench.harness.backends.client import CachedClient, KeyedCache
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError, CtxbenchError
from ctxbench.harness.core.identity import EXECUTION
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Request, Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.judge import verdicts
from ctxbench.tasks.judge.cache import JudgeSpend, judge_cache_file, verdict_key
from ctxbench.tasks.judge.verdicts import Refused

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
MAX_CHARS_PER_TOKEN = 8  # an answer longer than its token budget x this is cut before the judge sees it


def parsed_answer(output: str, prefix: str = "Answer:") -> str:
    """HELMET's cut of a model's answer: newlines to spaces, the text after the first `prefix` (any case) else the
    whole, stripped, and a repeated prefix removed."""
    text = output.replace("\n", " ")
    found = re.search(f"{re.escape(prefix)}(.*)", text, flags=re.IGNORECASE)
    picked = (found.group(1) if found else text).strip()
    return re.sub(f"^{re.escape(prefix)}", "", picked, flags=re.IGNORECASE).strip()


def within_budget(text: str, budget_tokens: int) -> tuple[str, list[str]]:
    """The answer as the judge gets it: whole, or cut at budget_tokens x MAX_CHARS_PER_TOKEN characters (a server
    that ignored max_tokens must not send megabytes to a paid judge), with a flag saying so."""
    limit = budget_tokens * MAX_CHARS_PER_TOKEN
    if len(text) <= limit:
        return text, []
    return text[:limit], [f"answer cut at {limit:,} of {len(text):,} characters before judging (over its "
                          f"{budget_tokens:,}-token budget)"]


class JudgeArgs(TaskArgs):
    task: str = Field("longbench/narrativeqa", description="the judged task: its prompts, samples and answers (e.g. longbench/narrativeqa)")
    task_args: dict[str, Any] = Field(default_factory=dict, description="the judged task's own arguments")
    model: str = Field("gpt-4o-2024-05-13", description="the judge model, as its OpenAI-compatible server names it (e.g. gpt-4o-2024-05-13)")
    version: str | None = Field(None, description="the judge's version as recorded in every row; default: model")
    base_url: str = Field("https://api.openai.com/v1", description="the judge's OpenAI-compatible root URL",
                          json_schema_extra=EXECUTION)
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the judge's API key ('' for none)",
                             json_schema_extra=EXECUTION)
    backend_args: dict[str, Any] = Field(default_factory=dict, description="more openai backend arguments for the judge "
                                         "(concurrency, max_retries, rpm, timeout, tokenizer, context_length)",
                                         json_schema_extra=EXECUTION)
    temperature: float = Field(0.1, ge=0, description="the judge's sampling temperature (HELMET: 0.1)")
    top_p: float = Field(0.9, gt=0, le=1, description="the judge's nucleus sampling (HELMET: 0.9)")
    seed: int = Field(42, description="the judge's sampling seed (HELMET: 42); a retry after a refused verdict adds "
                      "the number of earlier refusals")
    max_tokens: int = Field(2048, ge=1, description="tokens the judge may write, its reasoning and verdict (HELMET: "
                            "2048 for QA, 4096 for summaries)")


class QAJudgeArgs(JudgeArgs):
    question_field: str = Field("input", description="the judged task's record field holding the question")


class Judged(Task):
    """Another task's samples, scored by an LLM judge: `judge_prompts` are the paid calls of one sample (and flags
    on what the judge sees), `accept` reads one call's output as HELMET's script does (Refused: it would not score
    it) and `combine` makes HELMET's score of the sample."""

    Args = JudgeArgs
    protocol: ClassVar[str] = ""
    rubric_chars: ClassVar[int] = 0  # the rubric prompts' characters per sample (the cost estimate)

    def __init__(self, name: str, args: JudgeArgs):
        from ctxbench.harness.core.config import TaskSpec, build_task

        if args.task.startswith("judge/"):
            raise ConfigError(f"task: a judge judges an answering task, not {args.task}")
        self.inner = build_task(TaskSpec(task=args.task, args=args.task_args), where="args")
        super().__init__(f"{name}/{self.inner.name}", args)
        self.category, self.needs = self.inner.category, self.inner.needs
        self.reads_records = self.inner.reads_records  # a judge over a dataset's records keeps its first N too
        self.requires_data = getattr(self.inner, "requires_data", False)  # the judged task's data, and always a judge
        self._judge_client: CachedClient | None = None  # the judge's backend and verdict cache (the one cached client)
        self.spend = JudgeSpend()  # real use; --judge-budget's limits are set by harness/run/judge_budget.py before the run

    def judge_prompts(self, prediction: str, sample: Sample) -> tuple[list[str], list[str]]:
        raise NotImplementedError

    def accept(self, call: int, text: str, sample: Sample) -> dict[str, Any]:
        raise NotImplementedError

    def combine(self, values: list[dict[str, Any]], sample: Sample) -> tuple[float, dict[str, Any], list[str]]:
        """(HELMET's score of the sample on ctxbench's scale, more fields for the row's judge record, flags)."""
        raise NotImplementedError

    @property
    def max_new_tokens(self) -> int:
        return self.inner.max_new_tokens

    @property
    def paid_calls(self) -> tuple[int, int]:
        """(judge calls, tokens at most) per scored sample: the cost guard's unit (harness/run/judge_budget.py)."""
        calls = self.calls_per_sample
        answer = self.max_new_tokens * MAX_CHARS_PER_TOKEN // CHARS_PER_TOKEN  # the cut answer's bound (within_budget)
        prompt = self.rubric_chars // CHARS_PER_TOKEN + calls * (self.reference_tokens + answer)
        return calls, prompt + calls * self.args.max_tokens

    calls_per_sample: ClassVar[int] = 1
    reference_tokens: ClassVar[int] = QUESTION_TOKENS  # the cost estimate's allowance per call for question and references

    @property
    def version(self) -> str:
        return self.args.version or self.args.model

    @property
    def settings(self) -> dict[str, Any]:
        """The judge's sampling and token limit: its identity beside model and version (cache key, row, record)."""
        a = self.args
        return {"temperature": a.temperature, "top_p": a.top_p, "seed": a.seed, "max_tokens": a.max_tokens}

    def data_files(self, ctx: GenContext) -> list[Path]:
        return self.inner.data_files(ctx)

    def prepare(self, ctx: GenContext) -> None:
        """The judged task's data, and the judge's key, before anything is written (the judge is called mid-run)."""
        import os

        key = self.args.api_key_env
        if key and not os.environ.get(key):
            raise ConfigError(f"api_key_env: environment variable {key} is not set or empty; export the judge's API key "
                              "there, or set api_key_env: '' for a server without one")
        self.inner.prepare(ctx)

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return self.inner.samples_per_length(ctx)

    def samples_at(self, length: int, ctx: GenContext) -> int | None:
        return self.inner.samples_at(length, ctx) if hasattr(self.inner, "samples_at") else None

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        s = self.inner.generate(length=length, index=index, seed=seed, ctx=ctx)
        return dataclasses.replace(s, task=self.name, metric=self.metric, meta={**s.meta, **self.sample_meta(s, index, ctx)})

    def sample_meta(self, s: Sample, index: int, ctx: GenContext) -> dict[str, Any]:
        """What the judge's prompts need beyond the judged sample (its question, its key points)."""
        return {}

    def score(self, prediction: str, sample: Sample) -> float:
        score, _, error = self.score_row(prediction, sample)
        if error:
            raise RuntimeError(error)
        return float(score)

    def score_row(self, prediction: str, sample: Sample) -> tuple[float | None, dict[str, Any], str | None]:
        """(score, the row's `judge` field, error): every call's verdict from the cache, the others paid for in one
        batch; any failure is an error (the runner's error row, retried on rerun), never a 0 and never a stopped
        run. Only accepted verdicts are cached as verdicts, so a retry pays only for the calls that failed."""
        asked, flags = self.judge_prompts(prediction, sample)
        keys = [self.cache_key(p) for p in asked]
        judge: dict[str, Any] = {"model": self.args.model, "version": self.version, "protocol": self.protocol,
                                 **self.settings, "prompt_sha": [k[:16] for k in keys]}
        hits = [self._cached(i, k, sample) for i, k in enumerate(keys)]
        judge["cached"] = sum(h is not None for h in hits)
        error = self._pay([i for i, h in enumerate(hits) if h is None], asked, keys, hits, sample, judge)
        if error:
            return None, {"judge": {**judge, "flags": flags}}, error
        try:
            values = [self.accept(i, h["output"], sample) for i, h in enumerate(hits)]
            official, more, out_of_rubric = self.combine(values, sample)
        except Refused as e:  # accepted call by call, refused together (a non-finite score)
            return None, {"judge": judge}, f"judge: refused verdict ({e})"
        judge.update(verdicts=values, outputs=[h["output"] for h in hits], **more, official_score=official,
                     flags=flags + out_of_rubric + ([] if 0 <= official <= 1 else
                                                    [f"score {official:.4g} clipped to the board's 0..1"]),
                     prompt_tokens=sum(h.get("prompt_tokens") or 0 for h in hits),
                     completion_tokens=sum(h.get("completion_tokens") or 0 for h in hits),
                     seeds=[h.get("seed", self.args.seed) for h in hits])
        return min(1.0, max(0.0, official)), {"judge": judge}, None

    def _cached(self, call: int, key: str, sample: Sample) -> dict[str, Any] | None:
        """The cached verdict of a call, if today's reading accepts it (else it is asked again, never stuck)."""
        hit = self.cache().get(key)
        try:
            return hit if hit is None or self.accept(call, hit["output"], sample) is not None else None
        except Refused:
            return None

    def _pay(self, todo: list[int], asked: list[str], keys: list[str], hits: list, sample: Sample,
             judge: dict[str, Any]) -> str | None:
        """Ask the judge the calls in `todo` (a retry after refusals with seed + their count), caching each accepted
        verdict in `hits` and the cache; the first failure as the sample's error, None when all were accepted."""
        if not todo:
            return None
        self.spend.check()  # --judge-budget against real use: stop (resumably) before paying more
        seeds = {i: self.args.seed + self.cache().refusals(keys[i]) for i in todo}
        asks = [Request(f"{sample.id}/{i}", asked[i], self.args.max_tokens, user_text=asked[i],
                        sampling=(("seed", seeds[i]), ("temperature", self.args.temperature), ("top_p", self.args.top_p)))
                for i in todo]
        try:
            answers = self.client().generate(asks)
        except CtxbenchError as e:  # unreachable, credentials refused, a prompt over the judge's context
            return f"judge: {e}"
        errors = []
        for i, p in zip(todo, answers):
            if p.error:
                errors.append(f"judge: {p.error}")
                continue
            entry = {"output": p.text, "prompt_tokens": p.prompt_tokens, "completion_tokens": p.generated_tokens, "seed": seeds[i]}
            self.spend.add(1, (p.prompt_tokens or 0) + (p.generated_tokens or 0))
            try:
                self.accept(i, p.text, sample)
            except Refused as e:
                self.cache().put_refused(keys[i], {**entry, "reason": str(e)})
                judge.setdefault("refused", []).append({"call": i, "reason": str(e), "output": p.text, "seed": seeds[i]})
                errors.append(f"judge: refused verdict ({self.protocol} call {i}: {e})")
                continue
            hits[i] = entry
            self.cache().put(keys[i], entry)
        return errors[0] if errors else None

    def cache_key(self, prompt: str) -> str:
        return verdict_key({"model": self.args.model, "version": self.version, "protocol": self.protocol, **self.settings},
                           prompt)

    def cached_client(self) -> CachedClient:
        """The judge's openai backend behind its verdict cache, through the one cached client
        (harness/backends/client.py): the backend is built on the first paid call (a run whose verdicts are all
        cached builds none), and a judge that cannot be built (unreachable, credentials refused) fails every later
        sample of this run at once with the same error, without probing the server again; a rerun tries again."""
        if self._judge_client is None:
            args = {"api": "chat", "prefill": "user", "base_url": self.args.base_url, "api_key_env": self.args.api_key_env,
                    "tokenizer": "smollm2-135m", "context_length": 131072, **self.args.backend_args}
            self._judge_client = CachedClient("openai", self.args.model, args, KeyedCache(judge_cache_file(self.args.model)),
                                        field="backend_args")
        return self._judge_client

    def cache(self) -> KeyedCache:
        return self.cached_client().cache

    def client(self) -> Any:
        return self.cached_client().backend()


class JudgedQA(Judged):
    """HELMET's long-document QA judge: fluency x correctness / 3."""

    Args = QAJudgeArgs
    metric = "judge/qa"
    protocol = "helmet-qa"
    rubric_chars = len(QA_PROMPT)
    summary = "{name}: {task}'s answers scored by the LLM judge {model} with HELMET's QA rubric (fluency x correctness)"
    data_source = "the judged task's data; paid calls to the judge's server (--judge-budget)"

    def sample_meta(self, s: Sample, index: int, ctx: GenContext) -> dict[str, Any]:
        question = s.meta.get("question")
        if question is None and hasattr(self.inner, "record"):
            question = self.inner.record(index, ctx).get(self.args.question_field)
        if question is None:
            raise ConfigError(f"question_field: {self.args.task}'s items have no field {self.args.question_field!r}; "
                              "name the field that holds the question")
        return {"question": str(question)}

    def judge_prompts(self, prediction: str, sample: Sample) -> tuple[list[str], list[str]]:
        answer, flags = within_budget(parsed_answer(prediction), sample.max_new_tokens)
        return [QA_PROMPT.format(question=sample.meta["question"], correct_answers=str(list(sample.answers)),
                                 parsed_output=answer)], flags

    def accept(self, call: int, text: str, sample: Sample) -> dict[str, Any]:
        return verdicts.qa_values(text)

    def combine(self, values: list[dict[str, Any]], sample: Sample) -> tuple[float, dict[str, Any], list[str]]:
        score, flags = verdicts.qa_score(values[0])
        return score, {}, flags


@register("task", "judge/qa", args=QAJudgeArgs, version=1)
def judge_qa(**args):
    return JudgedQA("judge/qa", QAJudgeArgs(**args))
