"""The data RULER v2 reads, in the shape its generators build from it (NeMo-Skills chsieh/ruler2 @ 991a7432).

MMLU (cais/mmlu, config "all", MIT): the test split gives the questions asked, auxiliary_train the questions that fill
the context. Each becomes "question\\nA. ...\\nB. ...\\nC. ...\\nD. ..." with every run of whitespace made one space,
as prepare_mmlu.py does. Read from the hub at a pinned revision (the two parquet files), or from a local copy:
data_path or data_dir/ruler2/mmlu/ holding test and auxiliary_train as .parquet or .jsonl with the hub's columns.

HotpotQA (distractor setting, CC BY-SA 4.0): the train split's paragraphs ("title\\nsentences joined") fill the
context; each validation question brings its supporting paragraphs (the gold) and its other paragraphs (the
distractors), as prepare_qa.py reads them. Read from the official JSON files (the same data the hub's
hotpotqa/hotpot_qa loads), downloaded once, or from data_path or data_dir/ruler2/hotpotqa/{train,validation}.json
(or .jsonl; the official list-of-pairs format or the hub's columns). The paragraph set is sorted (the official code
keeps Python's set order, which changes between processes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.tasks.realdata import hub_file, read_records
from ctxbench.tasks.ruler.qa import title_sentence_pairs

MMLU_HUB = "cais/mmlu"
MMLU_REVISION = "c30699e8356da336a370243923dbaf21066bb9fe"
MMLU_FILES = {"test": "all/test-00000-of-00001.parquet", "auxiliary_train": "all/auxiliary_train-00000-of-00001.parquet"}
HOTPOT_URLS = {"train": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_train_v1.1.json",
               "validation": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json"}
LETTERS = "ABCD"


@dataclass(frozen=True)
class Question:
    text: str  # with its four options, whitespace collapsed
    answer: str  # A-D

    @property
    def solution(self) -> str:
        return " \\boxed{" + self.answer + "}"


@dataclass(frozen=True)
class Mmlu:
    test: list[Question]
    auxiliary: list[Question]


@dataclass(frozen=True)
class HotpotQuestion:
    question: str
    answers: tuple[str, ...]
    gold: tuple[str, ...]  # supporting paragraphs, in the record's order
    distractors: tuple[str, ...]


@dataclass(frozen=True)
class Hotpot:
    haystack: list[str]  # unique train paragraphs, sorted
    questions: list[HotpotQuestion]


def local_root(data_path: str | None, data_dir: Path | None, name: str) -> Path | None:
    """data_path, else data_dir/ruler2/<name>, else None (the download)."""
    if data_path:
        root = Path(data_path).expanduser()
        if not root.is_dir():
            raise ConfigError(f"data_path: {data_path} is not a directory; give a folder as laid out in the docs (ruler2 page)")
        return root
    if data_dir is not None and (data_dir / "ruler2" / name).is_dir():
        return data_dir / "ruler2" / name
    return None


def split_file(root: Path, split: str, suffixes: tuple[str, ...]) -> Path:
    for suffix in suffixes:
        if (root / f"{split}{suffix}").is_file():
            return root / f"{split}{suffix}"
    raise ConfigError(f"data_path: {root} has no {split}{' or '.join(suffixes)}; give the split as laid out in the docs (ruler2 page)")


def local_files(data_path: str | None, data_dir: Path | None, name: str) -> list[Path]:
    """The local copy's files (the sample cache is keyed by their content); none when the data is downloaded."""
    root = local_root(data_path, data_dir, name)
    return sorted(p for p in root.iterdir() if p.is_file()) if root is not None else []


def read_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return read_records(path)


def mmlu_question(row: dict) -> Question:
    """prepare_mmlu.py's item: the options appended, whitespace runs collapsed."""
    row = row.get("train", row) if isinstance(row.get("train"), dict) else row  # early hub copies nested auxiliary_train
    c = row["choices"]
    text = row["question"] + f"\nA. {c[0]}\nB. {c[1]}\nC. {c[2]}\nD. {c[3]}"
    return Question(re.sub(r"\s+", " ", text), LETTERS[int(row["answer"])])


def load_mmlu(ctx: GenContext, data_path: str | None, revision: str, what: str) -> Mmlu:
    def load() -> Mmlu:
        root = local_root(data_path, ctx.data_dir, "mmlu")
        splits = {}
        for split, hub_name in MMLU_FILES.items():
            if root is not None:
                path = split_file(root, split, (".parquet", ".jsonl", ".json"))
            else:
                path = hub_file(MMLU_HUB, hub_name, what=what, revision=revision,
                                hint="put test and auxiliary_train files under data_dir/ruler2/mmlu/ or pass data_path")
            try:
                splits[split] = [mmlu_question(r) for r in read_rows(path)]
            except (KeyError, TypeError, ValueError, IndexError) as e:
                raise ConfigError(f"data_path: {path} is not in MMLU's format (question, choices, answer: "
                                  f"{type(e).__name__}: {e}); give the official files") from None
            if not splits[split]:
                raise ConfigError(f"data_path: {path} holds no questions; give the official files")
        return Mmlu(splits["test"], splits["auxiliary_train"])

    return ctx.cached(("ruler2-mmlu", data_path, revision, str(ctx.data_dir)), load)


def _paragraphs(record: dict) -> list[tuple[str, str]]:
    """(title, paragraph text) of a record: the title, a newline, the sentences joined with nothing."""
    return [(t, f"{t}\n{''.join(s)}") for t, s in title_sentence_pairs(record["context"])]


def _supporting(record: dict) -> set[str]:
    facts = record.get("supporting_facts") or []
    return set(facts.get("title", [])) if isinstance(facts, dict) else {f[0] for f in facts}


def hotpot_question(record: dict) -> HotpotQuestion:
    support = _supporting(record)
    paragraphs = _paragraphs(record)
    return HotpotQuestion(record["question"], (record["answer"],), tuple(p for t, p in paragraphs if t in support),
                          tuple(p for t, p in paragraphs if t not in support))


def _hotpot_file(ctx: GenContext, root: Path | None, split: str) -> Path:
    if root is not None:
        return split_file(root, split, (".json", ".jsonl"))
    from ctxbench.harness.core.models import cache_dir
    from ctxbench.tasks.haystacks import download_once

    target = cache_dir("data") / HOTPOT_URLS[split].rsplit("/", 1)[1]
    return target if target.is_file() else download_once(HOTPOT_URLS[split], target)


def load_hotpot(ctx: GenContext, data_path: str | None) -> Hotpot:
    def load() -> Hotpot:
        root = local_root(data_path, ctx.data_dir, "hotpotqa")
        train, validation = _hotpot_file(ctx, root, "train"), _hotpot_file(ctx, root, "validation")
        try:
            haystack = sorted({p for record in read_records(train) for _, p in _paragraphs(record)})
            questions = [q for q in map(hotpot_question, read_records(validation)) if q.gold]  # the official needs a gold
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ConfigError(f"data_path: the HotpotQA files under {train.parent} are not in the official format "
                              f"({type(e).__name__}: {e}); give the official JSON files") from None
        if not haystack or not questions:
            raise ConfigError(f"data_path: the HotpotQA files under {train.parent} hold no paragraphs or questions; "
                              "give the official JSON files")
        return Hotpot(haystack, questions)

    return ctx.cached(("ruler2-hotpot", data_path, str(ctx.data_dir)), load)
