"""OpenAI GraphWalks (`graphwalks/bfs`, `graphwalks/parents`): a directed graph given as an edge list, and one
operation on it (the nodes at exactly depth N of a BFS from a node, or a node's parents); the answer is the set of
nodes, on the response's last line as `Final Answer: [a, b, ...]`.

Each official item's prompt is sent whole, as one user message (the dataset card: "supplied to the model as a user
message"), never cut: items are scored at the length bin of their real size under the scored model's tokenizer
(tasks/length_bins.py, the bins (L/2, L] that MRCR uses). Scoring is set F1 on the last line, by the grader named in
`grader` (tasks/graphwalks/grading.py; default the dataset card's). One question per graph: samples are independent
(no cluster), so `--until` applies.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import Rendered
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.graphwalks.grading import Grader, grade
from ctxbench.tasks.graphwalks.items import HUB, LONG, REVISION, SHORT, SHORT_TOP, GraphwalksItems, local_file, read_items
from ctxbench.tasks.length_bins import bin_item, items_in_bin
from ctxbench.tasks.realdata import hub_file

MAX_NEW_TOKENS = 1024
PROBLEM_TYPES = ("bfs", "parents")
OPERATIONS = {"bfs": "the nodes at exactly depth N of a BFS from a node", "parents": "the parents of a node"}


class GraphwalksArgs(TaskArgs):
    data_path: str | None = Field(None, description=f"local copy: a directory holding {SHORT}.parquet (and {LONG}.parquet for bins "
                                                     "past 128K), or .jsonl files of those names with the same columns; "
                                                     "default: data_dir/graphwalks/, else the hub at `revision`")
    revision: str = Field(REVISION, description=f"commit of the {HUB} hub dataset to download")
    grader: Grader = Field("card", description="how the last line is parsed and scored: card (the dataset card's code at the "
                                               "pinned revision, the default), lmeval (lm-evaluation-harness's f1: trailing "
                                               "newlines and quotes forgiven, an empty gold set scores 0) or lmeval-flexible "
                                               "(its flexible_f1: the last 'Final Answer: [...]' line anywhere)")
    limit: int | None = Field(None, ge=1, description="score at most the first N items of each length bin (official order); "
                                                      "default: the suite's samples")
    max_new_tokens: int = Field(MAX_NEW_TOKENS, ge=1, description="tokens the answer may take (counted in an item's size); "
                                                                  "raise it for thinking models and for BFS items with long node lists")


class Graphwalks(Task):
    Args = GraphwalksArgs
    category = "graph reasoning"
    metric = "graphwalks/f1"
    summary = ("{name}: return {operation} in a directed graph given as an edge list (OpenAI GraphWalks), items "
               "binned by their real token length; set F1 on the last line ({grader} grader)")
    data_source = f"{HUB} (hub, MIT, pinned revision; downloaded at run time), or data_path / data_dir/graphwalks/"
    requires_data = True

    def __init__(self, name: str, args: GraphwalksArgs, problem_type: str):
        super().__init__(name, args)
        self.problem_type = problem_type

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def describe(self) -> str:
        return self.summary.format(name=self.name, operation=OPERATIONS[self.problem_type], **self.args_json())

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return self.args.limit

    def local_root(self, data_dir: Path | None) -> Path | None:
        """The local copy's directory; None when there is none (the hub is used)."""
        if self.args.data_path:
            root = Path(self.args.data_path).expanduser()
            if not root.is_dir():
                raise ConfigError(f"data_path: {self.args.data_path} is not a directory; give one holding {SHORT}.parquet")
            return root
        if data_dir is not None and (data_dir / "graphwalks").is_dir():
            return data_dir / "graphwalks"
        return None

    def files(self, data_dir: Path | None, long: bool) -> list[Path]:
        stems = (SHORT, LONG) if long else (SHORT,)
        root = self.local_root(data_dir)
        if root is None:
            hint = f"put {SHORT}.parquet (and {LONG}.parquet) from the {HUB} hub repo under data_dir/graphwalks/ or pass data_path"
            return [hub_file(HUB, f"{stem}.parquet", what=self.name, hint=hint, revision=self.args.revision) for stem in stems]
        found = {stem: local_file(root, stem) for stem in stems}
        for stem, path in found.items():
            if path is None:
                why = " (bins past 128K read it)" if stem == LONG else ""
                raise ConfigError(f"data_path: {root} has no {stem}.parquet (nor .jsonl){why}; give the files of the {HUB} hub repo")
        return [p for p in found.values() if p is not None]

    def data_files(self, ctx: GenContext) -> list[Path]:
        root = self.local_root(ctx.data_dir)
        return [p for stem in (SHORT, LONG) if root is not None and (p := local_file(root, stem)) is not None]

    def items(self, ctx: GenContext, long: bool = False) -> GraphwalksItems:
        """This problem type's items: the short file's, and the long file's after them when `long`."""
        def load() -> GraphwalksItems:
            items = read_items(self.files(ctx.data_dir, long), self.problem_type)
            if not items.rows:
                raise ConfigError(f"{self.name}: the data holds no {self.problem_type} items; give the official files")
            return items

        key = ("graphwalks", self.problem_type, long, self.args.revision, self.args.data_path, str(ctx.data_dir))
        return ctx.cached(key, load)

    def prepare(self, ctx: GenContext) -> None:
        self.items(ctx)

    def rendered(self, items: GraphwalksItems, i: int, ctx: GenContext) -> tuple[Rendered, int]:
        """Item i's prompt as one user message, and its token count."""
        text = ctx.renderer.render(items.prompt(i))
        return text, ctx.count(text)

    def _bins(self, length: int, ctx: GenContext) -> tuple[GraphwalksItems, tuple, list[int]]:
        long = length > SHORT_TOP
        items = self.items(ctx, long)
        key = ("graphwalks", self.name, json.dumps(self.args_json(), sort_keys=True), str(ctx.data_dir), long)
        return items, key, items.chars()

    def size(self, items: GraphwalksItems, i: int, ctx: GenContext) -> int:
        return self.rendered(items, i, ctx)[1] + self.max_new_tokens

    def samples_at(self, length: int, ctx: GenContext) -> int:
        """How many official items lie in length's bin (the plan's count for that length)."""
        items, key, chars = self._bins(length, ctx)
        return len(items_in_bin(ctx, key, length, chars, lambda i: self.size(items, i, ctx)))

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        items, key, chars = self._bins(length, ctx)
        row = bin_item(ctx, key, length, index, chars, lambda i: self.size(items, i, ctx), self.name)
        text, tokens = self.rendered(items, row, ctx)
        rec = items.rows[row]
        meta = {"row": row, "problem_type": self.problem_type, "size": tokens + self.max_new_tokens,
                "prompt_chars": rec["prompt_chars"], "gold_nodes": len(rec["answer_nodes"]), "date_added": rec.get("date_added")}
        return self.make_sample(length=length, index=index, text=text, tokens=tokens, answers=rec["answer_nodes"], meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        return grade(prediction, sample.answers, self.args.grader)


def _register(problem_type: str) -> None:
    name = f"graphwalks/{problem_type}"

    def factory(**args):
        return Graphwalks(name, GraphwalksArgs(**args), problem_type)

    register("task", name, args=GraphwalksArgs)(factory)


for _problem_type in PROBLEM_TYPES:
    _register(_problem_type)
