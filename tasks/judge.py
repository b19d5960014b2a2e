"""The opt-in LLM judge (`judge/qa`, `judge/summary`): another task's samples, scored by a model behind an
OpenAI-compatible API with HELMET's model-based protocols (Yen et al. 2025, princeton-nlp/HELMET): long-document QA
(scripts/eval_gpt4_longqa.py) and summarisation (scripts/eval_gpt4_summ.py: fluency x F1 of key-point recall and
sentence precision, three calls per sample; its prompts are in tasks/judge_prompts.py).

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
from typing import Any, ClassVar

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Request, Sample
from ctxbench.tasks import judge_prompts as prompts
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


class QAJudgeArgs(JudgeArgs):
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


class Judged(Task):
    """Another task's samples, scored by an LLM judge: `prompts` are the paid calls of one sample, `verdict` reads one
    call's output (None: unreadable) and `combine` makes the score."""

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
        self.requires_data = getattr(self.inner, "requires_data", False)  # the judged task's data, and always a judge
        self._client: Any = None
        self._cache: JudgeCache | None = None

    def prompts(self, prediction: str, sample: Sample) -> list[str]:
        raise NotImplementedError

    def verdict(self, call: int, text: str) -> dict[str, int] | None:
        raise NotImplementedError

    def combine(self, verdicts: list[dict[str, int]], sample: Sample) -> float:
        raise NotImplementedError

    @property
    def max_new_tokens(self) -> int:
        return self.inner.max_new_tokens

    @property
    def paid_calls(self) -> tuple[int, int]:
        """(judge calls, tokens at most) per scored sample: the cost guard's unit (harness/judge.py)."""
        calls = self.calls_per_sample
        prompt = self.rubric_chars // CHARS_PER_TOKEN + calls * (self.reference_tokens + self.max_new_tokens)
        return calls, prompt + calls * self.args.max_tokens

    calls_per_sample: ClassVar[int] = 1
    reference_tokens: ClassVar[int] = QUESTION_TOKENS  # the cost estimate's allowance per call for question and references

    @property
    def version(self) -> str:
        return self.args.version or self.args.model

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
        batch; a failure is an error (the runner's error row, retried on rerun), never a 0. Only readable verdicts
        are cached, so a retry pays only for the calls that failed."""
        prompts = self.prompts(prediction, sample)
        keys = [self.cache_key(p) for p in prompts]
        judge: dict[str, Any] = {"model": self.args.model, "version": self.version, "protocol": self.protocol,
                                 "prompt_sha": [k[:16] for k in keys]}
        hits = [self.cache().get(k) for k in keys]
        judge["cached"] = sum(h is not None for h in hits)
        todo = [i for i, h in enumerate(hits) if h is None]
        asks = [Request(f"{sample.id}/{i}", prompts[i], self.args.max_tokens, user_text=prompts[i],
                        sampling=(("temperature", self.args.temperature),)) for i in todo]
        for i, p in zip(todo, self.client().generate(asks) if asks else []):
            if p.error:
                return None, {"judge": judge}, f"judge: {p.error}"
            if self.verdict(i, p.text) is None:
                return None, {"judge": {**judge, "output": p.text}}, f"judge: no readable verdict ({self.protocol} call {i})"
            hits[i] = {"output": p.text, "prompt_tokens": p.prompt_tokens, "completion_tokens": p.generated_tokens}
            self.cache().put(keys[i], hits[i])
        verdicts = [self.verdict(i, h["output"]) or {} for i, h in enumerate(hits)]
        judge.update(verdicts=verdicts, outputs=[h["output"] for h in hits],
                     prompt_tokens=sum(h.get("prompt_tokens") or 0 for h in hits),
                     completion_tokens=sum(h.get("completion_tokens") or 0 for h in hits))
        return self.combine(verdicts, sample), {"judge": judge}, None

    def cache_key(self, prompt: str) -> str:
        ident = {"model": self.args.model, "version": self.version, "protocol": self.protocol,
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


class JudgedQA(Judged):
    """HELMET's long-document QA judge: fluency (0-1) x correctness (0-3) / 3."""

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

    def prompts(self, prediction: str, sample: Sample) -> list[str]:
        return [QA_PROMPT.format(question=sample.meta["question"], correct_answers=str(list(sample.answers)),
                                 parsed_output=parsed_answer(prediction))]

    def verdict(self, call: int, text: str) -> dict[str, int] | None:
        return qa_verdict(text)

    def combine(self, verdicts: list[dict[str, int]], sample: Sample) -> float:
        return verdicts[0]["fluency"] * verdicts[0]["correctness"] / 3


class SummaryJudgeArgs(JudgeArgs):
    task: str = Field("infinitebench/longbook_sum_eng", description="the judged summarisation task (its answers[0] is the "
                      "expert summary)")
    keypoints_file: str | None = Field(None, description="HELMET's key points of each item, JSON lines {id, keypoints} "
                                       "(data/infbench/longbook_sum_eng_keypoints.jsonl of HELMET's data)")
    book: bool = Field(True, description="HELMET's prompts for novels (InfiniteBench); false: its legal-case prompts (Multi-LexSum)")


class JudgedSummary(Judged):
    """HELMET's summarisation judge: three calls (fluency 0-1, key points recalled, supported sentences); the score is
    fluency x F1 of key-point recall and sentence precision."""

    Args = SummaryJudgeArgs
    metric = "judge/summary"
    protocol = "helmet-summary"
    calls_per_sample = 3
    reference_tokens = 1024  # an expert summary or a list of key points
    rubric_chars = len(prompts.FLUENCY_BOOK) + len(prompts.RECALL_BOOK) + len(prompts.PRECISION_BOOK)
    summary = "{name}: {task}'s summaries scored by the LLM judge {model} with HELMET's rubric (fluency x F1 of key points)"
    data_source = "the judged task's data and HELMET's key points (keypoints_file); paid calls (--judge-budget)"

    def keypoints(self) -> dict[str, list[str]]:
        if self.args.keypoints_file is None:
            raise ConfigError("keypoints_file: HELMET's summary judge needs each item's key points; give HELMET's "
                              "data/infbench/longbook_sum_eng_keypoints.jsonl (or the Multi-LexSum file)")
        if not hasattr(self, "_keypoints"):
            from ctxbench.tasks.realdata import read_records

            rows = read_records(Path(self.args.keypoints_file).expanduser())
            self._keypoints = {str(r.get("id")): list(r.get("keypoints") or r.get("summary/short_keypoints") or []) for r in rows}
        return self._keypoints

    def data_files(self, ctx: GenContext) -> list[Path]:
        own = [Path(self.args.keypoints_file).expanduser()] if self.args.keypoints_file else []
        return [*self.inner.data_files(ctx), *(p for p in own if p.is_file())]

    def prepare(self, ctx: GenContext) -> None:
        self.keypoints()
        super().prepare(ctx)

    def sample_meta(self, s: Sample, index: int, ctx: GenContext) -> dict[str, Any]:
        item = str(s.meta.get("id", index))
        if item not in self.keypoints():
            raise ConfigError(f"keypoints_file: no key points for item {item!r} of {self.args.task}; give HELMET's key points file")
        return {"keypoints": self.keypoints()[item]}

    def prompts(self, prediction: str, sample: Sample) -> list[str]:
        text, book = prediction.strip(), self.args.book
        points = "\n".join(f"{i + 1}. {kp}" for i, kp in enumerate(sample.meta["keypoints"]))
        return [(prompts.FLUENCY_BOOK if book else prompts.FLUENCY).format(text=text),
                (prompts.RECALL_BOOK if book else prompts.RECALL).format(keypoints=points, summary=text),
                (prompts.PRECISION_BOOK if book else prompts.PRECISION).format(expert_summary=sample.answers[0], summary=text)]

    def verdict(self, call: int, text: str) -> dict[str, int] | None:
        return summary_verdict(call, text)

    def combine(self, verdicts: list[dict[str, int]], sample: Sample) -> float:
        fluency, recall, precision = verdicts
        points = len(sample.meta["keypoints"])
        rec = min(1.0, recall["recall"] / points) if points else 0.0
        prec = min(1.0, precision["precision"] / precision["sentence_count"]) if precision["sentence_count"] > 0 else 0.0
        return fluency["fluency"] * 2 * rec * prec / (rec + prec) if rec + prec > 0 else 0.0


SUMMARY_KEYS = ({"fluency": (0, 1)}, {"recall": None}, {"precision": None, "sentence_count": None})


def summary_verdict(call: int, text: str) -> dict[str, int] | None:
    """Call `call`'s scores (0 fluency, 1 recall, 2 precision): HELMET's parse (the last {...}, else a ```json block),
    each needed key a whole number (fluency 0 or 1); else None."""
    found = re.findall(r"\{.*?\}", text, re.DOTALL)
    blocks = re.findall(r"(?:```json)(.+)(?:```)", text, re.DOTALL)
    scores = None
    for candidate in ([found[-1]] if found else []) + ([blocks[-1]] if blocks else []):
        try:
            scores = json.loads(candidate)
            break
        except ValueError:
            continue
    if not isinstance(scores, dict):
        return None
    out = {}
    for key, allowed in SUMMARY_KEYS[call].items():
        value = scores.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (allowed and value not in allowed):
            return None
        out[key] = value
    return out


@register("task", "judge/summary")
def judge_summary(**args):
    return JudgedSummary("judge/summary", SummaryJudgeArgs(**args))


@register("task", "judge/qa")
def judge_qa(**args):
    return JudgedQA("judge/qa", QAJudgeArgs(**args))
