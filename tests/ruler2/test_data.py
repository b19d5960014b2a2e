"""RULER v2's data readers: the hub's formats (MMLU parquet, HotpotQA columns as `datasets` gives them) read the same
items as the official-format fixtures, and samples carry no cluster (each draws its own haystack)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.harness.core.context import GenContext
from ctxbench.tasks.ruler2.data import load_hotpot, load_mmlu, mmlu_question

DATA = Path(__file__).parent / "data"


def ctx_at(data_dir: Path) -> GenContext:
    return GenContext(tokenizer=None, renderer=None, data_dir=data_dir)


def test_mmlu_parquet_reads_as_the_jsonl(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "ruler2" / "mmlu"
    folder.mkdir(parents=True)
    for split in ("test", "auxiliary_train"):
        rows = [json.loads(line) for line in (DATA / "ruler2" / "mmlu" / f"{split}.jsonl").read_text().splitlines()]
        pq.write_table(pa.Table.from_pylist(rows), folder / f"{split}.parquet")
    assert load_mmlu(ctx_at(tmp_path), None, "unused", "t") == load_mmlu(ctx_at(DATA), None, "unused", "t")


def test_mmlu_item_text_and_nested_rows():
    row = {"question": "Pick  one:\n", "choices": ["a", "b\tb", "c", "d"], "answer": 1}
    assert mmlu_question(row).text == "Pick one: A. a B. b b C. c D. d" and mmlu_question(row).answer == "B"
    assert mmlu_question({"train": row}) == mmlu_question(row)  # early hub copies nest auxiliary_train rows
    assert mmlu_question(row).solution == " \\boxed{B}"


def hub_columns(record: dict) -> dict:
    """A HotpotQA record as `datasets` gives it: context and supporting_facts as columns of lists."""
    return {**record, "context": {"title": [t for t, _ in record["context"]], "sentences": [s for _, s in record["context"]]},
            "supporting_facts": {"title": [t for t, _ in record["supporting_facts"]],
                                 "sent_id": [i for _, i in record["supporting_facts"]]}}


def test_hotpot_hub_columns_read_as_the_official_json(tmp_path):
    folder = tmp_path / "ruler2" / "hotpotqa"
    folder.mkdir(parents=True)
    for split in ("train", "validation"):
        records = json.loads((DATA / "ruler2" / "hotpotqa" / f"{split}.json").read_text())
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(hub_columns(r)) + "\n" for r in records))
    ours, official = load_hotpot(ctx_at(tmp_path), None), load_hotpot(ctx_at(DATA), None)
    assert ours == official
    q = official.questions[0]
    assert q.gold == ("Dev Place 0-1\nDev Place 0-1 lies beside the mountain. It was founded in year 1001.",
                      "Dev Place 0-2\nDev Place 0-2 lies beside the planet. It was founded in year 1002.")
    assert len(q.distractors) == 2 and q.answers == ("1001",) and len(official.haystack) == 32


@pytest.mark.parametrize("name", ["mk_niah_basic", "mv_niah_easy", "qa_easy"])
def test_samples_are_independent_no_cluster(name, smol_tokenizer):
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.prompting import PromptRenderer

    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=DATA)
    s = registry.get("task", f"ruler2/{name}")().generate(length=2048, index=0, seed=0, ctx=ctx)
    assert "cluster" not in s.meta
