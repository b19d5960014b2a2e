"""Fixed-item sets on the length axis beside MRCR: LongBench v2 and BABILong with `binned: true` score each official
item whole at the bin of its real token length under the scored model's tokenizer (tasks/length_bins.py)."""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.config import Suite
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.harness.run.planning import plan_cells
from ctxbench.tasks.length_bins import in_bin

WORDS = "The committee met again to discuss the annual budget and its many surprising line items. "


@pytest.fixture()
def ctx(smol_tokenizer, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=tmp_path)


def _lb2(i: int, k: int) -> dict:
    return {"_id": f"id{i}", "domain": "d", "sub_domain": "s", "difficulty": "easy", "length": "short",
            "question": f"Question {i}?", "choice_A": "a", "choice_B": "b", "choice_C": "c", "choice_D": "d",
            "answer": "A", "context": f"Document {i}. " + WORDS * k}


def test_longbench2_binned_items_are_whole_and_in_their_bin(ctx, tmp_path):
    path = tmp_path / "lb2.jsonl"
    path.write_text("\n".join(json.dumps(_lb2(i, k)) for i, k in enumerate([5, 40, 12, 90, 3, 25])))
    binned = registry.get("task", "longbench2")(data_file=str(path), binned=True)
    cut = registry.get("task", "longbench2")(data_file=str(path))
    assert cut.samples_at(512, ctx) is None  # the default keeps every item at every length, cut to fit
    total = 0
    for length in (256, 512, 1024, 2048):
        n = binned.samples_at(length, ctx)
        total += n
        for j in range(n):
            s = binned.generate(length=length, index=j, seed=0, ctx=ctx)
            assert s.meta["truncated_tokens"] == 0 and in_bin(s.prompt_tokens + s.max_new_tokens, length)
            assert f"Document {s.meta['row']}." in s.prompt
    assert total == 6  # every item lands in exactly one of these bins


def test_babilong_binned_reads_the_splits_near_each_length(ctx, tmp_path):
    sizes = {"0k": 1, "1k": 6, "2k": 16, "4k": 30}
    for split, k in sizes.items():
        rows = [{"input": f"Mary went to the garden. {WORDS * (k + i)}Item {i} of {split}.", "question": "Where is Mary?",
                 "target": "garden"} for i in range(3)]
        (tmp_path / "babilong" / split).mkdir(parents=True)
        (tmp_path / "babilong" / split / "qa1.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    suite = Suite(name="b", lengths=[512, 1024, 4096], samples=50,
                  tasks=[{"task": "babilong/qa1", "args": {"binned": True}, "name": "babilong/qa1-binned"}, {"task": "babilong/qa1"}])
    cells, _ = plan_cells(suite, ctx)
    binned = {c.length: c for c in cells if c.task.args.binned}
    assert {c.planned for c in cells if not c.task.args.binned} == {50}  # unbinned: the suite's samples per split
    for length, cell in binned.items():
        for j in range(cell.planned):
            s = cell.task.generate(length=length, index=j, seed=0, ctx=ctx)
            assert s.meta["truncated_tokens"] == 0 and in_bin(s.prompt_tokens + s.max_new_tokens, length)
            assert f"of {s.meta['split']}." in s.prompt
    assert binned[512].planned > 0 and binned[1024].planned > 0
