"""HELMET's many-label in-context learning (`icl/trec_coarse`, `icl/trec_fine`, `icl/banking77`, `icl/clinic150`,
`icl/nlu`), beside SPLICE's `icl/trec` and `icl/dbpedia` (tasks/icl/task.py), whose protocol differs.

HELMET (data.py load_icl, configs/icl*.yaml): labels are mapped to integers by a per-item random permutation, so
the model must learn the mapping from the demonstrations; each test item gets its own label-balanced
demonstrations, drawn by a seed from the item's text; the demonstration count is fixed per length (TREC coarse
400/800/1600/3300/6600 at 8K/16K/32K/64K/128K, and so on below); 500 test items, label-balanced, where the test
split is larger; no chat template; 20 new tokens; score, as HELMET's eval.py runs it: "label:" put before the
output, then the value after the first "label:" equals the item's integer label (exact match after SQuAD
normalization); no newline cut unless `stop_newline: true` (tasks/helmet/metrics.py). A prompt too long for its
length loses the end of its demonstrations, as HELMET truncates.

Licences: TREC (CogComp/trec: public research data, no stated licence), Banking77 CC BY 4.0, CLINC150 CC BY 3.0,
NLU evaluation data CC BY 4.0; HELMET's code MIT. Downloaded from the hub at run time, or read from data_dir.
"""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path
from typing import Any

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.helmet.metrics import label_em
from ctxbench.tasks.helmet.task import STOP_NEWLINE_HELP, HelmetScoring, hf_shuffled, thinking_meta
from ctxbench.tasks.icl.task import _read_split
from ctxbench.tasks.realdata import fit_context, head_cut, hub_dataset, local_file, renderer_for

LENGTHS = (8192, 16384, 32768, 65536, 131072)
# name -> hub repo, config, (train split, test split), label column, number of labels, shots per HELMET length
DATASETS: dict[str, dict[str, Any]] = {
    "trec_coarse": dict(folder="trec", hub="CogComp/trec", config=None, splits=("train", "test"), label="coarse_label", labels=6,
                        shots=(400, 800, 1600, 3300, 6600)),
    "trec_fine": dict(folder="trec", hub="CogComp/trec", config=None, splits=("train", "test"), label="fine_label", labels=50,
                      shots=(400, 800, 1600, 3200, 6400)),
    "banking77": dict(hub="PolyAI/banking77", config=None, splits=("train", "test"), label="label", labels=77,
                      shots=(360, 720, 1450, 2900, 5900)),
    "clinic150": dict(hub="clinc_oos", config="plus", splits=("train", "validation"), label="intent", labels=151,
                      shots=(440, 880, 1750, 3525, 7050)),
    "nlu": dict(hub="xingkunliuxtracta/nlu_evaluation_data", config=None, splits=("train", None), label="label", labels=68,
                shots=(510, 1020, 2040, 4080, 8296)),  # one split, divided 90/10 by seed
}
PROMPT = 'Use the provided mapping from the text to label to assign a label to the text. Only output "label: {label}" and nothing else. \n\n'


class HelmetIclArgs(TaskArgs):
    train_file: str | None = Field(None, description="training split as HF columns (text + the label column) in .jsonl/.json/"
                                                      ".parquet/.csv; default: data_dir/<dataset>/train.*, else the hub")
    test_file: str | None = Field(None, description="test split, same formats (NLU: none, it is split from train); "
                                                     "default: data_dir/<dataset>/test.*, else the hub")
    shots: int | None = Field(None, ge=1, description="demonstrations per prompt at every length; default: HELMET's count for the length")
    limit: int = Field(500, ge=1, description="test items (HELMET's max_test_samples; label-balanced when the split is larger)")
    seed: int = Field(42, description="HELMET's --seed: the test draw, the NLU split and each item's demonstrations")
    plain: bool = Field(True, description="no chat template, as HELMET's configs (use_chat_template: false)")
    max_new_tokens: int = Field(20, ge=1, description="tokens to generate (HELMET: 20)")
    stop_newline: bool = Field(False, description=STOP_NEWLINE_HELP)


def balance_labels(rows: list[dict[str, Any]], label: str, shots: int, seed: int) -> list[dict[str, Any]]:
    """HELMET's label-balanced draw: rounds of one example per label (labels in order of first appearance), each
    round shuffled, the first `shots` kept; a label with fewer examples than rounds is drawn again."""
    rand = random.Random(seed)
    by_label: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_label.setdefault(row[label], []).append(row)
    rounds = math.ceil(shots / len(by_label))
    grouped: list[list[dict[str, Any]]] = [[] for _ in range(rounds)]
    for examples in by_label.values():
        picks = rand.sample(range(len(examples)), rounds % len(examples))  # HELMET's modulo, kept
        while len(picks) < rounds:
            picks += rand.sample(range(len(examples)), min(rounds - len(picks), len(examples)))
        for i, pick in enumerate(picks):
            grouped[i].append(examples[pick])
    for group in grouped:
        rand.shuffle(group)
    return [row for group in grouped for row in group][:shots]


def item_seed(text: str, seed: int) -> int:
    return (int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) + seed) % 2**31


class HelmetIcl(HelmetScoring, Task):
    Args = HelmetIclArgs
    cue = "label:"
    category = "in-context learning"
    metric = "helmet/label_em"
    summary = "HELMET ICL ({name}): many labels mapped to random integers, learnt from label-balanced demonstrations"
    data_source = "the dataset's hub train/test splits, or data_dir/<dataset>/train.*, test.* (TREC: data_dir/trec/)"
    requires_data = True

    def __init__(self, dataset: str, args: HelmetIclArgs):
        super().__init__(f"icl/{dataset}", args)
        self.dataset, self.spec = dataset, DATASETS[dataset]

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def samples_per_length(self, ctx: GenContext | None = None) -> int:
        return len(self.splits(ctx.data_dir if ctx is not None else None, ctx)[1])

    def _path(self, which: str, data_dir: Path | None) -> Path | None:
        given = self.args.train_file if which == "train" else self.args.test_file
        folder = self.spec.get("folder", self.dataset)  # TREC's files are shared with icl/trec
        return local_file(given, data_dir, [f"{folder}/{which}.{ext}" for ext in ("jsonl", "json", "parquet", "csv")])

    def data_files(self, ctx: GenContext) -> list[Path]:
        return [p for p in (self._path(w, ctx.data_dir) for w in ("train", "test")) if p is not None and p.is_file()]

    def _rows(self, which: str, split: str | None, data_dir: Path | None) -> list[dict[str, Any]]:
        path = self._path(which, data_dir)
        if path is not None:
            return _read_split(path)
        hint = f"pass {which}_file: (HF columns as jsonl/parquet) or put it at data_dir/{self.spec.get('folder', self.dataset)}/{which}.jsonl"
        return hub_dataset(self.spec["hub"], name=self.spec["config"], split=split, what=self.name, hint=hint)

    def splits(self, data_dir: Path | None, ctx: GenContext | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(train, drawn test items), as HELMET builds them."""
        def build():
            train_split, test_split = self.spec["splits"]
            train = self._rows("train", train_split, data_dir)
            if test_split is None and self._path("test", data_dir) is None:  # NLU: 10% test by datasets' train_test_split
                order, n_test = hf_shuffled(len(train), self.args.seed), math.ceil(0.1 * len(train))
                train, test = [train[i] for i in order[n_test:]], [train[i] for i in order[:n_test]]
            else:
                test = self._rows("test", test_split, data_dir)
            for rows, which in ((train, "train"), (test, "test")):
                if not rows or "text" not in rows[0] or self.spec["label"] not in rows[0]:
                    raise ConfigError(f"{self.name}.{which}_file: needs the columns 'text' and {self.spec['label']!r}")
            if len(test) > self.args.limit:
                shuffled = [test[i] for i in hf_shuffled(len(test), self.args.seed)]
                test = balance_labels(shuffled, self.spec["label"], self.args.limit, self.args.seed)
            return train, test

        if ctx is None:
            return build()
        return ctx.cached(("helmet-icl", self.name, repr(self.args), str(data_dir)), build)

    def shots_for(self, length: int) -> int:
        if self.args.shots is not None:
            return self.args.shots
        fits = [i for i, n in enumerate(LENGTHS) if n <= length]
        if not fits:
            raise ConfigError(f"length: HELMET's {self.name} starts at {LENGTHS[0]} tokens; use a longer length or set shots")
        return self.spec["shots"][fits[-1]]

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        train, test = self.splits(ctx.data_dir, ctx)
        if not 0 <= index < len(test):
            raise ConfigError(f"{self.name}: sample {index} is out of range; {len(test)} test items")
        rec, label = test[index], self.spec["label"]
        local = item_seed(str(rec["text"]), self.args.seed)
        shots = self.shots_for(length)
        demos = balance_labels(train, label, shots, local)
        mapping = list(range(self.spec["labels"]))
        random.Random(local).shuffle(mapping)
        context = "\n\n".join(f"{d['text']}\nlabel: {mapping[int(d[label])]}" for d in demos)
        renderer = renderer_for(ctx, self.args.plain)
        fit = fit_context(ctx, lambda c: renderer.render(PROMPT + c + f"\n\n{rec['text']}\nlabel:"), context, length=length,
                          max_new_tokens=self.max_new_tokens, what=f"{self.name} item {index}", cut=head_cut)
        meta = {"shots": shots, "template": renderer.template, "truncated_tokens": fit.truncated_tokens,
                "context_tokens": fit.context_tokens, **thinking_meta(ctx)}
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens,
                                answers=[str(mapping[int(rec[label])])], meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        return label_em(self.helmet_text(prediction, sample), sample.answers)


def _register(dataset: str) -> None:
    def factory(**args):
        return HelmetIcl(dataset, HelmetIclArgs(**args))

    register("task", f"icl/{dataset}", args=HelmetIclArgs, version=1)(factory)


for _d in DATASETS:
    _register(_d)
