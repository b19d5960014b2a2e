"""The `longbenchpro/<task>` tasks: LongBench Pro's 25 secondary tasks over natural English and Chinese documents of
8K-256K tokens, each with the official prompt and metric.

Items are the official records of one secondary task (tasks/longbenchpro/items.py), sent whole as one user message,
never cut. `bins: level` (the default) scores an item at the ctxbench length of its official level (8k -> 8192 ...
256k -> 262144; the authors measured the levels under the Qwen tokenizer, so an item's real size under another
tokenizer may stray from its level: `prompt_tokens` records it); `bins: tokens` scores it at the length bin of its
real size under the scored model's tokenizer (tasks/length_bins.py, (L/2, L], to 1M). Every sample carries its
document's cluster id, so intervals are cluster-robust and `--until` refuses the tasks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.length_bins import bin_item, items_in_bin
from ctxbench.tasks.longbenchpro.catalog import LEVEL_OF_LENGTH, LEVELS, TASKS, SecondaryTask
from ctxbench.tasks.longbenchpro.items import FILE, Item, Question, local_file, read_items
from ctxbench.tasks.longbenchpro.metrics import RangeCheck, metric_value
from ctxbench.tasks.realdata import hub_file

HUB = "caskcsg/LongBench-Pro"
REVISION = "4996884deae51f5e5d23c88da9d857fc54e5fa15"  # the dataset's commit this task reads by default
EMBEDDING_MODEL = "Qwen/Qwen3-Embedding-8B"  # the official Summary metric's embedding model
MAX_NEW_TOKENS = 1024  # the official protocol's output length for non-thinking scores (README: 1k; 8k thinking)


class LongbenchProArgs(TaskArgs):
    data_path: str | None = Field(None, description=f"local copy: {FILE} (or a folder holding it); default: "
                                  "data_dir/longbenchpro/, else the hub at `revision`")
    revision: str = Field(REVISION, description=f"commit of the {HUB} hub dataset to download")
    question: Question = Field("nonthinking", description="the record's question: nonthinking (the official default) or "
                               "thinking (the official --thinking_enabled; pair it with --thinking on)")
    bins: Literal["level", "tokens"] = Field("level", description="level: an item scored at its official level (8k = 8192 "
                                             "... 256k = 262144); tokens: at the bin (L/2, L] of its real size under the "
                                             "scored model's tokenizer, to 1M")
    language: Literal["all", "English", "Chinese"] = Field("all", description="keep the items of one language (official: all)")
    limit: int | None = Field(None, ge=1, description="score at most the first N items of each length (official order); "
                              "default: the suite's samples")
    max_new_tokens: int = Field(MAX_NEW_TOKENS, ge=1, description="tokens the answer may take (the official protocol: "
                                "1k for non-thinking scores; counted in an item's size under bins: tokens)")


class SummaryArgs(LongbenchProArgs):
    embedding_model: str = Field(EMBEDDING_MODEL, description="the Summary metric's sentence-transformers model (official: "
                                 "Qwen3-Embedding-8B), a hub name or a local folder; loaded when the first summary is scored")
    range_check: RangeCheck = Field("zero", description="a summary score outside [0, 1] (an embedding's float noise past "
                                    "1.0): zero, as the official range assertion does, or clip (the intent)")


def load_embedder(name: str) -> Any:
    """The Summary metric's embedding model, as the official Evaluator loads it (left padding; the keyword that
    sentence-transformers 3 calls tokenizer_kwargs, later versions processor_kwargs)."""
    import inspect

    from sentence_transformers import SentenceTransformer

    key = "processor_kwargs" if "processor_kwargs" in inspect.signature(SentenceTransformer.__init__).parameters \
        else "tokenizer_kwargs"
    return SentenceTransformer(name, **{key: {"padding_side": "left"}})


class LongbenchPro(Task):
    Args = LongbenchProArgs
    category = "long-document understanding"
    metric = "longbenchpro"
    summary = ("{name}: {official} over a natural English/Chinese document (LongBench Pro), official items {where} "
               "({metric_name})")
    data_source = (f"{HUB} (hub, Apache-2.0, pinned revision; downloaded at run time), or data_path / "
                   "data_dir/longbenchpro/")
    requires_data = True
    shared_context = "document"

    def __init__(self, spec: SecondaryTask, args: LongbenchProArgs):
        super().__init__(spec.task_name, args)
        self.spec = spec
        self.metric = f"longbenchpro/{spec.metric.lower()}"
        self._embedder = None

    def describe(self) -> str:
        where = ("at their official length level 8K-256K" if self.args.bins == "level"
                 else "binned by their real token length")
        return self.summary.format(name=self.name, official=self.spec.official, metric_name=self.spec.metric, where=where)

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return self.args.limit

    # ------------------------------------------------------------ data

    def data_files(self, ctx: GenContext) -> list[Path]:
        found = local_file(self.args.data_path, ctx.data_dir)
        return [found] if found else []

    def all_items(self, ctx: GenContext) -> list[Item]:
        def load() -> list[Item]:
            path = local_file(self.args.data_path, ctx.data_dir)
            if path is None:
                hint = f"put {FILE} at data_dir/longbenchpro/ (from the {HUB} hub repo) or pass data_path"
                path = hub_file(HUB, FILE, what=self.name, hint=hint, revision=self.args.revision)
            return read_items(path)

        return ctx.cached(("longbenchpro", self.args.revision, self.args.data_path, str(ctx.data_dir)), load)

    def items(self, ctx: GenContext) -> list[Item]:
        """This secondary task's items (of the chosen language), in the official order."""
        lang = self.args.language
        return [it for it in self.all_items(ctx)
                if it.secondary_task == self.spec.official and lang in ("all", it.language)]

    def prepare(self, ctx: GenContext) -> None:
        if not self.items(ctx):
            raise ConfigError(f"{self.name}: the data holds no {self.spec.official!r} items"
                              + ("" if self.args.language == "all" else f" in {self.args.language}")
                              + "; give the official file")
        if self.spec.metric == "Summary":
            try:
                import rouge  # noqa: F401
                import sentence_transformers  # noqa: F401
            except ImportError:
                raise ConfigError(f"{self.name}: the Summary metric needs `pip install rouge jieba sentence-transformers` "
                                  "(ctxbench[realdata,synth])") from None

    # ------------------------------------------------------------ samples

    def rendered(self, item: Item, ctx: GenContext):
        text = ctx.renderer.render([{"role": "user", "content": item.prompt(self.args.question)}])
        return text, ctx.count(text)

    def _bin_key(self, ctx: GenContext) -> tuple:
        return ("longbenchpro", self.name, json.dumps(self.args_json(), sort_keys=True), str(ctx.data_dir))

    def _in_level(self, length: int, ctx: GenContext) -> list[Item]:
        level = LEVEL_OF_LENGTH.get(length)
        return [it for it in self.items(ctx) if it.level == level]

    def samples_at(self, length: int, ctx: GenContext) -> int:
        """How many official items this length holds (the plan's count for it)."""
        if self.args.bins == "level":
            return len(self._in_level(length, ctx))
        items = self.items(ctx)
        chars = [len(it.context) + len(it.questions[self.args.question]) for it in items]
        return len(items_in_bin(ctx, self._bin_key(ctx), length, chars, lambda i: self.size(items[i], ctx)))

    def size(self, item: Item, ctx: GenContext) -> int:
        return self.rendered(item, ctx)[1] + self.max_new_tokens

    def pick(self, length: int, index: int, ctx: GenContext) -> Item:
        if self.args.bins == "tokens":
            items = self.items(ctx)
            chars = [len(it.context) + len(it.questions[self.args.question]) for it in items]
            return items[bin_item(ctx, self._bin_key(ctx), length, index, chars, lambda i: self.size(items[i], ctx),
                                  self.name)]
        found = self._in_level(length, ctx)
        if not 0 <= index < len(found):
            levels = ", ".join(f"{v} ({k})" for k, v in LEVELS.items())
            raise ConfigError(f"{self.name}: sample {index} is out of range; length {length} holds {len(found)} items "
                              f"(the official levels are the lengths {levels}; lower the suite's samples)")
        return found[index]

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        item = self.pick(length, index, ctx)
        text, tokens = self.rendered(item, ctx)
        meta = {"id": item.id, "language": item.language, "level": item.level, "question": self.args.question,
                "size": tokens + self.max_new_tokens, "cluster": item.cluster, **item.extra}
        return self.make_sample(length=length, index=index, text=text, tokens=tokens, answers=list(item.answer), meta=meta)

    # ------------------------------------------------------------ scoring

    def embedder(self) -> Any:
        if self._embedder is None:
            self._embedder = load_embedder(self.args.embedding_model)
        return self._embedder

    def score(self, prediction: str, sample: Sample) -> float:
        summary = self.spec.metric == "Summary"
        return metric_value(self.spec.metric, list(sample.answers), prediction,
                            chinese=sample.meta.get("language") == "Chinese",
                            embedder=self.embedder() if summary and prediction.strip() else None,
                            range_check=self.args.range_check if summary else "zero")


def _register(spec: SecondaryTask) -> None:
    args_type = SummaryArgs if spec.metric == "Summary" else LongbenchProArgs

    def factory(**args):
        return LongbenchPro(spec, args_type(**args))

    register("task", spec.task_name, args=args_type)(factory)


for _spec in TASKS:
    _register(_spec)
