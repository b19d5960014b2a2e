"""BABILong: the official exact-label scoring on hand-made hard cases, the loader, and the length -> split axis."""

from __future__ import annotations

import json

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.babilong.task import LABELS, label_correct, split_for

# (task, target, model output, question, the official compare_answers verdict): each one a naive
# "target in output" or "output == target" check gets wrong.
PARITY = [
    ("qa1", "garden", "The most recent location of Mary is Garden.", "Where is Mary?", True),  # case
    ("qa1", "bathroom", "bathroom. Before that, the kitchen.", "Where is John?", True),  # first sentence only
    ("qa1", "bathroom", "bathroom or kitchen", "Where is John?", False),  # two labels said
    ("qa3", "bathroom", "Before the kitchen the apple was in the bathroom.", "Where was the apple before the kitchen?", True),
    ("qa3", "kitchen", "Before the kitchen the apple was in the kitchen", "Where was the apple before the kitchen?", False),
    ("qa1", "hallway", "hallway Question: where is the kitchen", "Where is Sandra?", False),  # 'Question' cut never fires
    ("qa1", "office", "office<example>kitchen", "Where is Daniel?", True),  # cut at <example>
    ("qa1", "office", "office <context> kitchen", "Where is Daniel?", True),  # cut at <context>
    ("qa5", "Fred", "fred", "Who did Mary give the football to?", True),  # labels compared lower-cased
    ("qa5", "apple", "Fred gave the apple", "What did Fred give to Bill?", True),  # Fred and Bill are in the question
    ("qa6", "no", "not sure", "Is John in the garden?", True),  # 'no' is a substring of 'not'
    ("qa6", "yes", "yes, although not now", "Is John in the garden?", False),  # 'no' found too
    ("qa7", "none", "none", "How many objects is Mary carrying?", False),  # 'one' is inside 'none'
    ("qa7", "two", "two", "How many objects is Mary carrying?", True),
    ("qa8", "apple,milk", "milk, apple", "What is Daniel carrying?", True),  # any order
    ("qa8", "apple,milk", "apple", "What is Daniel carrying?", False),
    ("qa8", "apple,milk", "apple, milk, football", "What is Daniel carrying?", False),
    ("qa8", "nothing", "Nothing.", "What is Sandra carrying?", True),
    ("qa10", "maybe", "Maybe. Or no.", "Is Mary in the school?", True),
]


@pytest.mark.parametrize("qa,target,output,question,official", PARITY)
def test_label_scoring_matches_the_official_scorer(qa, target, output, question, official):
    assert label_correct(target, output, question, LABELS[qa]) is official


def test_length_picks_the_largest_official_split_it_holds():
    # the official sizes are GPT-2 tokens of the whole prompt, 1000 a "k" (data/create_tasks.py)
    assert [split_for(n) for n in (512, 999, 1000, 4096, 6000, 131072, 1_000_000, 1_048_576)] == \
        ["0k", "0k", "1k", "4k", "4k", "128k", "1M", "1M"]


def _items(n, split):
    return [{"input": f"Mary went to the garden. {'Filler text here. ' * 5}Item {i} of {split}.",
             "question": "Where is Mary?", "target": "garden"} for i in range(n)]


@pytest.fixture()
def ctx(smol_tokenizer, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer, "plain"), data_dir=tmp_path)


def test_local_copy_per_split_official_prompt_and_score(ctx, tmp_path):
    for split in ("0k", "1k"):
        (tmp_path / "babilong" / split).mkdir(parents=True)
        (tmp_path / "babilong" / split / "qa1.jsonl").write_text("\n".join(json.dumps(r) for r in _items(3, split)))
    task = registry.get("task", "babilong/qa1")()
    assert task.samples_per_length(ctx) is None  # the suite's samples decide
    short, long = task.generate(length=512, index=1, seed=0, ctx=ctx), task.generate(length=1500, index=2, seed=0, ctx=ctx)
    assert short.meta["split"] == "0k" and "Item 1 of 0k." in short.prompt and long.meta["split"] == "1k"
    assert short.prompt.startswith("I will give you context with the facts about positions")
    assert short.prompt.endswith("</context>\n\nQuestion: Where is Mary?") and short.max_new_tokens == 20
    assert task.score("The most recent location of Mary is garden.", short) == 1.0
    assert task.score("kitchen", short) == 0.0
    with pytest.raises(ConfigError, match="out of range; split 0k has 3 items"):
        task.generate(length=512, index=3, seed=0, ctx=ctx)
    fixed = registry.get("task", "babilong/qa1")(split="0k")
    assert fixed.generate(length=2048, index=0, seed=0, ctx=ctx).meta["split"] == "0k"


def test_hub_file_names_and_parquet(ctx, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "copy" / "0k").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(_items(2, "0k")), tmp_path / "copy" / "0k" / "qa1-00000-of-00001.parquet")
    task = registry.get("task", "babilong/qa1")(data_path=str(tmp_path / "copy"))
    assert task.generate(length=512, index=1, seed=0, ctx=ctx).answers == ("garden",)
    assert [p.name for p in task.data_files(ctx)] == ["qa1-00000-of-00001.parquet"]


def test_hub_path_names_the_length_config_and_task_split(ctx, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda repo, name=None, split=None: calls.append((repo, name, split))
                        or _items(2, name))
    monkeypatch.setattr("ctxbench.tasks.realdata.hub_reachable", lambda: True)
    monkeypatch.setattr(ctx, "data_dir", None)
    registry.get("task", "babilong/qa2")(variant="1k").generate(length=4096, index=0, seed=0, ctx=ctx)
    assert calls == [("RMT-team/babilong-1k-samples", "4k", "qa2")]


def test_bad_arguments_are_refused():
    with pytest.raises(ConfigError, match="only qa1, qa2, qa3, qa4, qa5"):
        registry.get("task", "babilong/qa7")(variant="1k")
    with pytest.raises(ConfigError, match="unknown BABILong split '3k'"):
        registry.get("task", "babilong/qa1")(split="3k")


def test_shipped_suite_builds_every_task():
    from ctxbench.harness.core.config import build_task, load_suite

    suite = load_suite("babilong")
    assert all(build_task(spec).max_new_tokens == 20 for spec in suite.tasks)
    assert [s.task for s in suite.tasks] == [f"babilong/qa{i}" for i in range(1, 11)] and suite.samples == 100
