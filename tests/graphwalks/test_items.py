"""GraphWalks items: the official prompt sent whole as one user message, items binned by their real size under the
scored model's tokenizer (tasks/length_bins.py), the long file read only past 128K, and bad local copies refused.

The fixture (tests/graphwalks/data/graphwalks/) holds hand-made items in the official format, not official ones: the
official files cannot be downloaded at test time.

Prompt parity: the official code sends the row's `prompt` column as the user message as it is (the dataset card: "This
is mean to be supplied to the model as a user message"; EleutherAI/lm-evaluation-harness 4e7e0d47
lm_eval/tasks/graphwalks/graphwalks_128k.yaml: doc_to_text "{{prompt}}", target_delimiter ""); so the rendered prompt
is the tokenizer's chat template over that one message.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.length_bins import in_bin

DATA = Path(__file__).parent / "data"
SHORT = DATA / "graphwalks" / "graphwalks_128k_and_shorter.jsonl"


def rows(problem_type: str) -> list[dict]:
    found = [json.loads(line) for line in SHORT.read_text().splitlines()]
    return [r for r in found if r["problem_type"] == problem_type]


@pytest.fixture()
def plain(smol_tokenizer, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=DATA)


@pytest.mark.parametrize("problem_type", ["bfs", "parents"])
def test_official_prompt_is_one_user_message_sent_whole(smol_tokenizer, problem_type, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "auto"), data_dir=DATA)
    task = registry.get("task", f"graphwalks/{problem_type}")()
    sample = task.generate(length=4096, index=0, seed=0, ctx=ctx)
    row = rows(problem_type)[sample.meta["row"]]
    expected = smol_tokenizer.apply_chat_template([{"role": "user", "content": row["prompt"]}], tokenize=False,
                                                  add_generation_prompt=True)
    assert sample.prompt == expected and sample.user_text == row["prompt"]
    assert list(sample.answers) == row["answer_nodes"] and sample.meta["problem_type"] == problem_type
    assert "cluster" not in sample.meta  # one question per graph: independent samples, so --until applies


@pytest.mark.parametrize("problem_type", ["bfs", "parents"])
def test_items_binned_by_real_size_in_official_order(plain, problem_type):
    task = registry.get("task", f"graphwalks/{problem_type}")(max_new_tokens=256)
    items = task.items(plain)
    sizes = [task.size(items, i, plain) for i in range(len(items.rows))]
    total = 0
    for length in (2048, 4096, 8192, 16384):
        expected = [i for i, n in enumerate(sizes) if in_bin(n, length)]
        assert task.samples_at(length, plain) == len(expected)
        got = [task.generate(length=length, index=j, seed=0, ctx=plain) for j in range(len(expected))]
        assert [s.meta["row"] for s in got] == expected
        for s in got:
            assert s.length == length and s.prompt_tokens + 256 == sizes[s.meta["row"]] <= length
            right = "Final Answer: [" + ", ".join(reversed(s.answers)) + "]"
            assert task.score(right, s) == 1.0 and task.score(right + "\n", s) == 0.0  # the card's last line
        total += len(expected)
    assert total == len(rows(problem_type))  # every item lands in exactly one of these bins
    with pytest.raises(ConfigError, match="out of range; the bin of length 2048"):
        task.generate(length=2048, index=task.samples_at(2048, plain), seed=0, ctx=plain)


def test_empty_gold_and_graders(plain):
    task = registry.get("task", "graphwalks/parents")()
    empty = next(i for i, r in enumerate(rows("parents")) if not r["answer_nodes"])
    length = next(L for L in (2048, 4096, 8192) if empty in [task.generate(length=L, index=j, seed=0, ctx=plain).meta["row"]
                                                            for j in range(task.samples_at(L, plain))])
    sample = next(s for j in range(task.samples_at(length, plain))
                  if (s := task.generate(length=length, index=j, seed=0, ctx=plain)).meta["row"] == empty)
    assert sample.answers == () and task.score("Final Answer: []", sample) == 1.0
    lmeval = registry.get("task", "graphwalks/parents")(grader="lmeval")
    assert lmeval.score("Final Answer: []", sample) == 0.0  # lm-eval scores an empty gold set 0 whatever is said


def test_long_file_only_past_128k(plain, tmp_path):
    copy = tmp_path / "gw"
    copy.mkdir()
    shutil.copy(SHORT, copy / SHORT.name)
    task = registry.get("task", "graphwalks/bfs")(data_path=str(copy))
    assert task.samples_at(4096, plain) == registry.get("task", "graphwalks/bfs")().samples_at(4096, plain)
    with pytest.raises(ConfigError, match="has no graphwalks_256k_to_1mil.parquet .nor .jsonl. .bins past 128K"):
        task.samples_at(262144, plain)
    (copy / "graphwalks_256k_to_1mil.jsonl").write_text(SHORT.read_text().splitlines()[0] + "\n")
    fresh = GenContext(plain.tokenizer, plain.renderer, data_dir=DATA)  # a new run reads its data again
    assert task.samples_at(262144, fresh) == 0 and len(task.items(fresh, long=True).rows) == len(rows("bfs")) + 1


def test_parquet_copy_reads_as_the_jsonl(plain, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "gw"
    copy.mkdir()
    records = [json.loads(line) for line in SHORT.read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(records), copy / "graphwalks_128k_and_shorter.parquet", row_group_size=3)
    from_parquet = registry.get("task", "graphwalks/parents")(data_path=str(copy))
    from_jsonl = registry.get("task", "graphwalks/parents")()
    for length in (4096, 8192):
        a = [from_parquet.generate(length=length, index=j, seed=0, ctx=plain) for j in range(from_parquet.samples_at(length, plain))]
        b = [from_jsonl.generate(length=length, index=j, seed=0, ctx=plain) for j in range(from_jsonl.samples_at(length, plain))]
        assert [(s.prompt, s.answers) for s in a] == [(s.prompt, s.answers) for s in b] and a


def test_bad_local_copies(plain, tmp_path):
    with pytest.raises(ConfigError, match="data_path: .* is not a directory"):
        registry.get("task", "graphwalks/bfs")(data_path=str(tmp_path / "nowhere")).prepare(plain)
    with pytest.raises(ConfigError, match="has no graphwalks_128k_and_shorter.parquet"):
        registry.get("task", "graphwalks/bfs")(data_path=str(tmp_path)).prepare(plain)
    (tmp_path / "graphwalks_128k_and_shorter.jsonl").write_text(json.dumps({"prompt": "p", "answer_nodes": ["a"]}) + "\n")
    with pytest.raises(ConfigError, match="not in GraphWalks' format"):
        registry.get("task", "graphwalks/bfs")(data_path=str(tmp_path)).prepare(plain)
    (tmp_path / "graphwalks_128k_and_shorter.jsonl").write_text(json.dumps({"prompt": "p", "answer_nodes": ["a"], "problem_type": "bfs"}))
    with pytest.raises(ConfigError, match="holds no parents items"):
        registry.get("task", "graphwalks/parents")(data_path=str(tmp_path)).prepare(
            GenContext(plain.tokenizer, plain.renderer, data_dir=tmp_path))
    with pytest.raises(ValueError, match="grader"):
        registry.get("task", "graphwalks/bfs")(grader="exact")
