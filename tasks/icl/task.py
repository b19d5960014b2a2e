"""Many-shot in-context classification (`icl/trec`, `icl/dbpedia`), as SPLICE evaluates it (Section 3.3).

SPLICE tests TREC (coarse, 6 classes) with 90/780/1560 demonstrations at 2K/16K/32K tokens and
DBpedia (14 classes) with 190/380 at 16K/32K, averaging accuracy over several random sets of
demonstrations drawn without replacement from the training split (TREC: the whole 500-question
test set per set; DBpedia: a random 500-example test subset per set, Appendix H). The paper gives no
prompt; we use the Parallel Context Windows format that its TREC/DBpedia setup comes from:
"Question: {text}\nType: {label}" (DBpedia: "input: {content}\ntype: {label}") with PCW's label words,
demonstrations joined by "\n==\n", the test query ending at "Type:".

A sample's index is (set, test example): set = index // per_set. Each set fixes one random order
of training examples; a length uses its first `shots` (or as many as fit), so the demonstrations
at a longer length extend those at a shorter one, and every query of a set shares its prefix.
PCW restricts decoding to the label tokens; we generate freely and score the first word of the
answer against the label word, so a model that ignores the format scores lower than there.
"""

from __future__ import annotations

import csv
import json
import random
import string
from pathlib import Path
from typing import Any

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import fit_units
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs, sample_seed
from ctxbench.tasks.haystacks import sequence_cum
from ctxbench.tasks.realdata import hub_dataset, local_file, read_records, renderer_for

SEPARATOR = "\n==\n"
DATASETS: dict[str, dict[str, Any]] = {
    "trec": dict(hub="CogComp/trec", x="text", y=("coarse_label", "label-coarse"), x_prefix="Question: ", y_prefix="Type: ",
                 labels=("abbreviation", "entity", "description", "human", "location", "numeric"),
                 shots={2048: 90, 16384: 780, 32768: 1560}, num_sets=10, eval_per_set=None),
    "dbpedia": dict(hub="fancyzhx/dbpedia_14", x="content", y=("label",), x_prefix="input: ", y_prefix="type: ",
                    labels=("company", "school", "artist", "athlete", "politics", "transportation", "building", "nature",
                            "village", "animal", "plant", "album", "film", "book"),
                    shots={16384: 190, 32768: 380}, num_sets=40, eval_per_set=500),
}
TREC_COARSE = {"ABBR": 0, "ENTY": 1, "DESC": 2, "HUM": 3, "LOC": 4, "NUM": 5}  # the HF dataset's label order
ORDER_SIZE = 20000  # demonstrations drawn per set (a prefix is used): far more than 1M tokens of TREC or DBpedia


class IclArgs(TaskArgs):
    train_file: str | None = Field(None, description="training split: the HF columns as .jsonl/.json/.parquet/.csv, TREC's "
                                                      "train_5500.label or DBpedia's headerless train.csv; default: data_dir/<dataset>/, else the hub")
    test_file: str | None = Field(None, description="test split, same formats; default: data_dir/<dataset>/ or the hub")
    shots: int | dict[int, int] | None = Field(None, description="most demonstrations per prompt, or a map length -> count "
                                                                 "(lengths not in it: as many as fit); default: the paper's counts")
    num_sets: int | None = Field(None, ge=1, description="random sets of demonstrations (TREC 10 for 7B models in the paper, DBpedia 40)")
    eval_per_set: int | None = Field(None, ge=1, description="test examples per set, a random subset (DBpedia: 500); default: the paper's")
    plain: bool = Field(True, description="render as plain completion text without the chat template, as LongBench does for few-shot tasks")
    max_new_tokens: int = Field(8, ge=1, description="tokens to generate; the label is the first word")


def label_word(prediction: str) -> str:
    words = prediction.strip().split()
    return words[0].strip(string.punctuation).lower() if words else ""


@register("metric", "icl/label")
def label_match(prediction: str, references) -> float:
    """1 if the first word of the prediction (punctuation stripped, lowercased) is the label word."""
    return float(label_word(prediction) == references[0])


def _read_split(path: Path) -> list[dict[str, Any]]:
    if path.name.endswith(".label"):  # the original TREC files: "DESC:manner How did serfdom develop ... ?"
        rows = []
        for line in path.read_text(encoding="latin-1").splitlines():
            if line.strip():
                tag, text = line.split(" ", 1)
                rows.append({"text": text.strip(), "coarse_label": TREC_COARSE[tag.split(":")[0]]})
        return rows
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            table = list(csv.reader(f))
        if table and "label" in table[0]:
            head = table[0]
            return [dict(zip(head, r)) for r in table[1:]]
        return [{"label": int(r[0]) - 1, "title": r[1], "content": r[2]} for r in table]  # DBpedia's csv: classes 1..14
    if path.suffix == ".parquet":
        import datasets

        return [dict(r) for r in datasets.load_dataset("parquet", data_files=str(path), split="train")]
    return read_records(path)


class ManyShotICL(Task):
    Args = IclArgs
    category = "in-context learning"
    summary = "many-shot in-context classification ({name}): as many demonstrations as the length holds"
    data_source = "TREC / DBpedia-14 train+test (hub, or data_dir/<dataset>/)"
    shared_context = "set of demonstrations"
    metric = "icl/label"
    requires_data = True  # cannot generate without TREC / DBpedia (local files or hub)

    def __init__(self, dataset: str, args: IclArgs):
        super().__init__(f"icl/{dataset}", args)
        self.dataset, self.spec = dataset, DATASETS[dataset]
        self._splits: dict[str, list[tuple[str, int]]] = {}

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def split(self, which: str, data_dir: Path | None) -> list[tuple[str, int]]:
        """(text, label index) pairs of a split, from the local file or the hub."""
        if which not in self._splits:
            path = self._split_path(which, data_dir)
            hint = f"pass {which}_file: (HF columns as jsonl/parquet/csv) or put it at data_dir/{self.dataset}/{which}.jsonl"
            rows = _read_split(path) if path else hub_dataset(self.spec["hub"], split=which, what=self.name, hint=hint)
            ycol = next((c for c in self.spec["y"] if rows and c in rows[0]), None)
            if not rows or ycol is None or self.spec["x"] not in rows[0]:
                raise ConfigError(f"{self.name}.{which}_file: needs columns {self.spec['x']!r} and {self.spec['y'][0]!r}")
            self._splits[which] = [(str(r[self.spec["x"]]), int(r[ycol])) for r in rows]
        return self._splits[which]

    def _split_path(self, which: str, data_dir: Path | None) -> Path | None:
        given = self.args.train_file if which == "train" else self.args.test_file
        names = [f"{self.dataset}/{which}.{ext}" for ext in ("jsonl", "json", "parquet", "csv")]
        if self.dataset == "trec":
            names.append("trec/train_5500.label" if which == "train" else "trec/TREC_10.label")
        return local_file(given, data_dir, names)

    def data_files(self, ctx: GenContext) -> list[Path]:
        paths = (self._split_path(which, ctx.data_dir) for which in ("train", "test"))
        return [p for p in paths if p is not None and p.is_file()]

    def _per_set(self, data_dir: Path | None) -> int:
        n, want = len(self.split("test", data_dir)), self.args.eval_per_set or self.spec["eval_per_set"]
        return min(n, want) if want else n

    def samples_per_length(self, ctx: GenContext | None = None) -> int:
        return (self.args.num_sets or self.spec["num_sets"]) * self._per_set(ctx.data_dir if ctx else None)

    def _shots(self, length: int) -> int | None:
        shots = self.spec["shots"] if self.args.shots is None else self.args.shots
        return shots.get(length) if isinstance(shots, dict) else shots

    def _shot(self, text: str, label: int) -> str:
        return f"{self.spec['x_prefix']}{text}\n{self.spec['y_prefix']}{self.spec['labels'][label]}"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        train, test = self.split("train", ctx.data_dir), self.split("test", ctx.data_dir)
        per_set = self._per_set(ctx.data_dir)
        which, j = divmod(index, per_set)
        args = json.dumps(self.args_json(), sort_keys=True)
        order = ctx.cached(("icl-order", self.name, args, which, seed), lambda: random.Random(
            sample_seed(self.name, "demonstrations", which, seed)).sample(range(len(train)), min(len(train), ORDER_SIZE)))
        if per_set < len(test):
            picks = ctx.cached(("icl-test", self.name, args, which, seed), lambda: random.Random(
                sample_seed(self.name, "test", which, seed)).sample(range(len(test)), per_set))
            j = picks[j]
        text, gold = test[j]
        query = f"{self.spec['x_prefix']}{text}\n{self.spec['y_prefix']}".rstrip()
        renderer = renderer_for(ctx, self.args.plain)
        piece = lambda i: self._shot(*train[order[i % len(order)]]) + SEPARATOR  # noqa: E731
        wanted = self._shots(length)
        budget = length - self.max_new_tokens
        cap = len(order) if wanted is None else min(wanted, len(order))
        key = ("icl", self.name, args, which, seed)
        cum = sequence_cum(ctx, key, piece, min(cap, 64))
        while len(cum) - 1 < cap and cum[-1] < budget:  # piece costs, up to a little past what the budget holds
            cum = sequence_cum(ctx, key, piece, min(cap, 2 * (len(cum) - 1)))
        cap = min(cap, len(cum) - 1)

        def build(n: int):
            return renderer.render("".join(piece(i) for i in range(n)) + query), n

        fitted = fit_units(budget=budget, build=build, estimate=lambda n: float(cum[n]), count=ctx.count, count_short=ctx.count_short,
                           state=self.fit_state(ctx, length), max_units=cap, min_units=1, what=self.name)
        meta = {"set": which, "test_index": j, "shots": fitted.n, "shots_wanted": wanted, "template": renderer.template,
                "label": self.spec["labels"][gold], "cluster": f"{self.name}:{length}:{seed}:{which}"}  # a set's queries share its demonstrations
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens,
                                answers=[self.spec["labels"][gold]], meta=meta)


def _register(dataset: str) -> None:
    def factory(**args):
        return ManyShotICL(dataset, IclArgs(**args))

    register("task", f"icl/{dataset}", args=IclArgs)(factory)


for _d in DATASETS:
    _register(_d)
