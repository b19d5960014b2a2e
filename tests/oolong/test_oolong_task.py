"""Oolong tasks: official windows scored whole at the bin of their real size, a window's questions one cluster, the
official row order, the task arguments, local copies in parquet or .jsonl, and bad data refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.length_bins import in_bin

FIXTURE = Path(__file__).parent / "data"


@pytest.fixture()
def ctx(smol_tokenizer, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=FIXTURE)


def task(split: str, **args):
    return registry.get("task", f"oolong/{split}")(**args)


def bin_samples(t, length, ctx):
    return [t.generate(length=length, index=j, seed=0, ctx=ctx) for j in range(t.samples_at(length, ctx))]


@pytest.mark.parametrize("split,counts", [("synth", {1024: 5, 2048: 5, 4096: 5, 8192: 0}), ("real", {1024: 3, 2048: 3, 4096: 0})])
def test_windows_land_whole_in_their_bin_as_one_cluster(split, counts, ctx):
    t = task(split)
    assert {length: t.samples_at(length, ctx) for length in counts} == counts
    seen = set()
    for length in counts:
        samples = bin_samples(t, length, ctx)
        windows = {w.window_id: i for i, w in enumerate(t.items(ctx).windows)}
        for s in samples:
            assert in_bin(t.window_size(windows[s.meta["context_window_id"]], ctx), length)  # the window, by its longest question
            assert s.meta["cluster"] == f"oolong/{split}:{s.meta['context_window_id']}"
            assert s.prompt_tokens + s.max_new_tokens <= length
        assert len({s.meta["cluster"] for s in samples}) == (1 if samples else 0)  # one window per bin in the fixture
        seen |= {s.meta["row"] for s in samples}
    assert seen == set(range(sum(counts.values())))  # every official row in exactly one bin


def test_official_order_sorts_windows_by_id_and_keeps_file_order_within(ctx, tmp_path):
    rows = [json.loads(line) for line in (FIXTURE / "oolong" / "synth" / "test.jsonl").read_text().splitlines()]
    small = [r for r in rows if r["context_window_id"] == 101]
    moved = [{**r, "context_window_id": 100 + 2 * (i % 2), "id": 50 - i} for i, r in enumerate(small)]  # ids 100 and 102
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "test.jsonl").write_text("\n".join(json.dumps(r) for r in moved))
    samples = bin_samples(task("synth", data_path=str(tmp_path / "copy")), 1024, ctx)
    assert [s.meta["context_window_id"] for s in samples] == [100, 100, 100, 102, 102]
    assert [s.meta["id"] for s in samples] == [50, 48, 46, 49, 47]


def test_windows_argument_and_labels_and_card_prompt(ctx):
    assert task("synth", windows=1).samples_at(1024, ctx) == 5
    plain = task("synth").generate(length=1024, index=0, seed=0, ctx=ctx)
    labeled = task("synth", labels=True, max_new_tokens=64).generate(length=1024, index=0, seed=0, ctx=ctx)
    assert "|| Label:" in labeled.turns[0][1] and "|| Label:" not in plain.turns[0][1]
    card = task("synth", prompt="card").generate(length=1024, index=0, seed=0, ctx=ctx)
    assert card.turns == () and "You are a helpful assistant." not in card.prompt
    row = json.loads((FIXTURE / "oolong" / "synth" / "test.jsonl").read_text().splitlines()[0])
    assert f"{row['context_window_text']}\n{row['question']}" in card.prompt


def test_score_row_carries_the_parse(ctx):
    t = task("synth")
    s = next(s for s in bin_samples(t, 1024, ctx) if s.meta["answer_type"] == "ANSWER_TYPE.NUMERIC")
    gold = json.loads(s.answers[0])[0]
    score, extra, error = t.score_row(f"Answer: {gold + 2}", s)
    assert (score, error) == (0.5625, None) and extra == {"parse": {"answer": str(gold + 2), "confidence": "vhigh"}}
    r = task("real")
    s = r.generate(length=1024, index=0, seed=0, ctx=ctx)
    assert r.score("\\boxed{" + s.answers[0] + "}", s) == 1.0


def test_parquet_copy_reads_window_texts_lazily(ctx, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (FIXTURE / "oolong" / "synth" / "test.jsonl").read_text().splitlines()]
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pq" / "test-00000-of-00001.parquet", row_group_size=4)
    t = task("synth", data_path=str(tmp_path / "pq"))
    from_jsonl = task("synth")
    for length in (1024, 2048, 4096):
        assert t.samples_at(length, ctx) == from_jsonl.samples_at(length, ctx)
        assert t.generate(length=length, index=4, seed=0, ctx=ctx).prompt == from_jsonl.generate(length=length, index=4, seed=0,
                                                                                                   ctx=ctx).prompt


def test_bad_data_is_one_line_naming_data_path(ctx, tmp_path):
    with pytest.raises(ConfigError, match="data_path: .* is not a directory"):
        task("synth", data_path=str(tmp_path / "nowhere")).prepare(ctx)
    with pytest.raises(ConfigError, match=r"data_path: .* has no \*.parquet or \*.jsonl"):
        task("synth", data_path=str(tmp_path)).prepare(ctx)
    (tmp_path / "bad.jsonl").write_text(json.dumps({"id": 1, "question": "q"}) + "\n")
    with pytest.raises(ConfigError, match="data_path: .*bad.jsonl is not in Oolong's format"):
        task("synth", data_path=str(tmp_path)).prepare(ctx)
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ConfigError, match="bad.jsonl:1 is not a JSON object"):
        task("synth", data_path=str(tmp_path)).prepare(ctx)
    with pytest.raises(ConfigError, match="sample 5 is out of range; the bin of length 1024"):
        task("synth").generate(length=1024, index=5, seed=0, ctx=ctx)


@pytest.mark.parametrize("split,repo,revision,name", [
    ("synth", "oolongbench/oolong-synth", "f0d59eaf0febf130664cfceb710436c8e3216b2b", "data/test-00000-of-00001.parquet"),
    ("real", "oolongbench/oolong-real", "6bc9ef04866fcf005c9749b70649be69dd37fffb", "dnd/test.jsonl"),
])
def test_without_a_local_copy_the_pinned_hub_files_are_read(split, repo, revision, name, smol_tokenizer, tmp_path, monkeypatch):
    import ctxbench.tasks.oolong.tasks as oolong

    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    asked = []
    monkeypatch.setattr(oolong.Oolong, "hub_names", lambda self: [name])
    monkeypatch.setattr(oolong, "hub_file", lambda repo_, f, **kw: asked.append((repo_, f, kw["revision"]))
                        or next((FIXTURE / "oolong" / split).glob("*.jsonl")))
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=tmp_path)
    assert task(split).samples_at(1024, ctx) > 0
    assert asked == [(repo, name, revision)]
    assert task(split).args_json()["revision"] == revision  # recorded with the run's task arguments


def test_offline_without_a_copy_is_one_line_naming_where_to_put_it(smol_tokenizer, tmp_path, monkeypatch):
    import ctxbench.tasks.oolong.tasks as oolong
    import ctxbench.tasks.realdata as realdata
    from ctxbench.harness.core.errors import OfflineError

    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for module in (realdata, oolong):  # no connection is tried
        monkeypatch.setattr(module, "hub_reachable", lambda timeout=3.0: False)
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=tmp_path)
    with pytest.raises(OfflineError, match="data_dir/oolong/synth/") as e:
        task("synth").prepare(ctx)
    assert "\n" not in str(e.value)


def test_hub_listing_keeps_the_test_split_files(monkeypatch):
    import huggingface_hub

    import ctxbench.tasks.oolong.tasks as oolong

    listed = {"oolongbench/oolong-synth": ["README.md", "data/validation-00000-of-00003.parquet", "data/test-00001-of-00002.parquet",
                                           "data/test-00000-of-00002.parquet"],
              "oolongbench/oolong-real": ["README.md", "toy_dnd/test.jsonl", "dnd/validation.jsonl", "dnd/test.jsonl"]}
    monkeypatch.setattr(oolong, "hub_reachable", lambda timeout=3.0: True)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda repo, repo_type, revision: listed[repo])
    assert task("synth").hub_names() == ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"]
    assert task("real").hub_names() == ["dnd/test.jsonl"]


@pytest.mark.parametrize("name", ["oolong", "oolong-quick"])
def test_suites_load_and_build(name):
    from ctxbench.harness.core.config import load_suite
    from ctxbench.harness.run.planning import build_task

    suite = load_suite(name)
    assert [build_task(spec).name for spec in suite.tasks] == ["oolong/synth", "oolong/real"]
    assert max(suite.lengths) == (1048576 if name == "oolong" else 4096)
