"""The `aalcr` task: Artificial Analysis Long Context Reasoning (AA-LCR), 100 questions over 30 document sets of about
100K tokens, each answered from several real documents at once, scored by an LLM equality checker.

Items are the official rows (tasks/aalcr/items.py) with the official prompt, sent as one user message, scored whole
(never cut) at the length bin of their real size under the scored model's tokenizer (tasks/length_bins.py: the
rendered prompt plus the answer budget, in (L/2, L]). Questions on one document set carry the set as their cluster,
so intervals are cluster-robust and `--until` refuses the task.

Scoring goes through ctxbench's opt-in judge (tasks/judge/task.py: named, versioned, its settings part of every verdict's
cache key, paid calls guarded by --judge-budget, a failed call an error row a rerun retries) with the official
equality-check prompt and NeMo-Skills' reading of the verdict (tasks/aalcr/verdicts.py). The official protocol
averages repeated generations (3 on the public board): `--repeats 3 --gen-kwargs temperature=...`, each repeat a row
(`~r` ids) judged on its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import EXECUTION
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.aalcr import verdicts
from ctxbench.tasks.aalcr.items import CSV_NAME, ZIP_NAME, AalcrItems, Documents, local_layout, read_questions
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.judge.cache import JudgeSpend
from ctxbench.tasks.judge.task import Judged, within_budget
from ctxbench.tasks.length_bins import bin_item, items_in_bin
from ctxbench.tasks.realdata import hub_file

HUB = "ArtificialAnalysis/AA-LCR"
REVISION = "c8cab57e8dd1c46ec621fda42b455614b66ce93b"  # "fix: update AA-LCR_dataset.csv token counts"
JUDGE_MODEL = "Qwen/Qwen3-235B-A22B-Instruct-2507"  # the card: Qwen3 235B A22B 2507 Non-reasoning checks equality
OPENAI_URL = "https://api.openai.com/v1"
MAX_NEW_TOKENS = 1024


class AalcrArgs(TaskArgs):
    data_path: str | None = Field(None, description="local copy: a folder with AA-LCR_Dataset.csv and the documents (lcr/ "
                                  "extracted, or extracted_text/AA-LCR_extracted-text.zip); default: data_dir/aalcr/, else the hub")
    revision: str = Field(REVISION, description="commit of the ArtificialAnalysis/AA-LCR hub dataset to download")
    limit: int | None = Field(None, ge=1, description="score at most the first N questions of each length bin (official "
                              "order); default: the suite's samples")
    max_new_tokens: int = Field(MAX_NEW_TOKENS, ge=1, description="tokens the answer may take (counted in a question's size)")
    verdict: verdicts.Parse = Field("prefix", description="prefix: the verdict read as NeMo-Skills runs it (stripped, upper-"
                                    "cased, starts with CORRECT); exact: the card's intent, only the word CORRECT")
    model: str = Field(JUDGE_MODEL, description="the equality checker, as its OpenAI-compatible server names it (the card: "
                       "Qwen3 235B A22B 2507, non-reasoning)")
    version: str | None = Field(None, description="the judge's version as recorded in every row; default: model")
    base_url: str | None = Field(None, description="the judge's OpenAI-compatible root URL; default: $OPENAI_BASE_URL, else "
                                 f"{OPENAI_URL}", json_schema_extra=EXECUTION, validate_default=True)
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the judge's API key ('' for none)",
                             json_schema_extra=EXECUTION)
    backend_args: dict[str, Any] = Field(default_factory=dict, description="more openai backend arguments for the judge "
                                         "(concurrency, max_retries, rpm, timeout)", json_schema_extra=EXECUTION)
    temperature: float = Field(0.0, ge=0, description="the judge's sampling temperature (NeMo-Skills: 0, greedy)")
    top_p: float = Field(0.95, gt=0, le=1, description="the judge's nucleus sampling (NeMo-Skills: 0.95)")
    seed: int = Field(0, description="the judge's sampling seed (NeMo-Skills: 0)")
    max_tokens: int = Field(256, ge=1, description="tokens the judge may write (its reply is one word)")

    @field_validator("base_url")
    @classmethod
    def _from_env(cls, v: str | None) -> str:
        return v or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL


class Aalcr(Judged):
    """AA-LCR's questions, answered by the scored model and checked by the judge; not a wrapper of another task."""

    Args = AalcrArgs
    category = "reasoning"
    metric = "aalcr"
    protocol = "aalcr-equality"
    rubric_chars = len(verdicts.JUDGE_PROMPT)
    reference_tokens = 512  # the bare question and the official answer
    shared_context = "document set"
    summary = ("{name}: reason across a set of real documents (~100K tokens) to answer one question (AA-LCR); official "
               "items binned by real token length, checked by the LLM judge {model}")
    data_source = ("ArtificialAnalysis/AA-LCR (hub, pinned revision; downloaded at run time), or data_path / "
                   "data_dir/aalcr/; paid calls to the judge's server (--judge-budget)")

    def __init__(self, name: str, args: AalcrArgs):
        Task.__init__(self, name, args)  # Judged's own __init__ builds a judged task; AA-LCR answers its own items
        self.requires_data = True
        self._judge_client = None
        self.spend = JudgeSpend()

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return self.args.limit

    # ------------------------------------------------------------ data

    def local_root(self, data_dir: Path | None) -> Path | None:
        if self.args.data_path:
            root = Path(self.args.data_path).expanduser()
            if not root.is_dir():
                raise ConfigError(f"data_path: {self.args.data_path} is not a directory; give a folder with {CSV_NAME} "
                                  "and the documents")
            return root
        if data_dir is not None and (data_dir / "aalcr").is_dir():
            return data_dir / "aalcr"
        return None

    def local_files(self, data_dir: Path | None) -> tuple[Path, Path] | None:
        root = self.local_root(data_dir)
        if root is None:
            return None
        found = local_layout(root)
        if found is None:
            raise ConfigError(f"data_path: {root} has no {CSV_NAME}; give a copy laid out as the {HUB} hub repo")
        return found

    def data_files(self, ctx: GenContext) -> list[Path]:
        found = self.local_files(ctx.data_dir)
        if found is None:
            return []
        table, docs = found
        return [table, *(sorted(p for p in docs.rglob("*") if p.is_file()) if docs.is_dir() else [docs])]

    def items(self, ctx: GenContext) -> AalcrItems:
        def load() -> AalcrItems:
            found = self.local_files(ctx.data_dir)
            if found is None:
                hint = f"put {CSV_NAME} and the documents at data_dir/aalcr/ (from the {HUB} hub repo) or pass data_path"
                found = tuple(hub_file(HUB, f, what=self.name, hint=hint, revision=self.args.revision)
                              for f in (CSV_NAME, ZIP_NAME))
            questions = read_questions(found[0])
            if not questions:
                raise ConfigError(f"{self.name}: {found[0]} holds no questions; give the official {CSV_NAME}")
            return AalcrItems(questions, Documents.open(found[1]))

        return ctx.cached(("aalcr", self.args.revision, self.args.data_path, str(ctx.data_dir)), load)

    def prepare(self, ctx: GenContext) -> None:
        key = self.args.api_key_env
        if key and not os.environ.get(key):
            raise ConfigError(f"api_key_env: environment variable {key} is not set or empty; export the judge's API key "
                              "there, or set api_key_env: '' for a server without one")
        items = self.items(ctx)
        for i in range(len(items.questions)):
            items.prompt(i)  # every document found before anything is written

    # ------------------------------------------------------------ samples

    def rendered(self, i: int, ctx: GenContext):
        text = ctx.renderer.render([{"role": "user", "content": self.items(ctx).prompt(i)}])
        return text, ctx.count(text)

    def size(self, i: int, ctx: GenContext) -> int:
        return self.rendered(i, ctx)[1] + self.max_new_tokens

    def _bin_key(self, ctx: GenContext) -> tuple:
        return ("aalcr", json.dumps(self.args_json(), sort_keys=True), str(ctx.data_dir))

    def samples_at(self, length: int, ctx: GenContext) -> int:
        """How many official questions lie in length's bin (the plan's count for that length)."""
        chars = self.items(ctx).chars()
        return len(items_in_bin(ctx, self._bin_key(ctx), length, chars, lambda i: self.size(i, ctx)))

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        items = self.items(ctx)
        row = bin_item(ctx, self._bin_key(ctx), length, index, items.chars(), lambda i: self.size(i, ctx), self.name)
        text, tokens = self.rendered(row, ctx)
        q = items.questions[row]
        meta = {"row": row, "question_id": q.question_id, "document_category": q.category, "document_set_id": q.set_id,
                "input_tokens": q.input_tokens, "question": q.question, "size": tokens + self.max_new_tokens,
                "cluster": f"{self.name}:{q.set_key}"}
        return self.make_sample(length=length, index=index, text=text, tokens=tokens, answers=[q.answer], meta=meta)

    # ------------------------------------------------------------ judging

    def judge_prompts(self, prediction: str, sample: Sample) -> tuple[list[str], list[str]]:
        answer, flags = within_budget(prediction, sample.max_new_tokens)
        return [verdicts.judge_prompt(sample.meta["question"], sample.answers[0], answer)], flags

    def accept(self, call: int, text: str, sample: Sample) -> dict[str, Any]:
        return {"verdict": text, "correct": verdicts.is_correct(text, self.args.verdict)}

    def combine(self, values: list[dict[str, Any]], sample: Sample) -> tuple[float, dict[str, Any], list[str]]:
        return (1.0 if values[0]["correct"] else 0.0), {}, verdicts.off_protocol(values[0]["verdict"])

    def score_row(self, prediction: str, sample: Sample) -> tuple[float | None, dict[str, Any], str | None]:
        """An empty answer is incorrect whatever a judge would say (NeMo-Skills' generation_valid): 0, no paid call."""
        if not verdicts.answered(prediction):
            return 0.0, {"judge": {"model": self.args.model, "version": self.version, "protocol": self.protocol,
                                   **self.settings, "skipped": "empty answer: incorrect without a judge call"}}, None
        return super().score_row(prediction, sample)


@register("task", "aalcr", args=AalcrArgs)
def aalcr(**args):
    return Aalcr("aalcr", AalcrArgs(**args))
