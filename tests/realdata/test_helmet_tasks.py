"""HELMET's RAG, re-rank and ICL tasks on small hand-written files in HELMET's formats (no network)."""

from __future__ import annotations

import json
import math

import pytest

from ctxbench.harness.core import registry
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError, OfflineError
from ctxbench.harness.core.prompting import PromptRenderer


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


@pytest.fixture()
def ctx(smol_tokenizer, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("ctxbench.tasks.realdata.hub_reachable", lambda: False)
    return GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=tmp_path)


def _qa(i, prefix="q"):
    return {"id": f"{prefix}{i}", "question": f"Who wrote book {i}?", "answers": [f"Author {i}"],
            "ctxs": [{"title": f"Book {i}", "text": f"Book {i} was written by Author {i}."},
                     {"title": "Other", "text": "Unrelated text. " * 3}]}


def test_rag_reads_helmets_file_for_the_length_with_two_demonstrations(ctx, tmp_path):
    kilt = tmp_path / "helmet" / "data" / "kilt"
    _jsonl(kilt / "nq-dev-multikilt_1000_k50_dep6.jsonl", [_qa(i) for i in range(4)])
    _jsonl(kilt / "nq-train-multikilt_1000_k3_dep6.jsonl", [_qa(i, "t") for i in range(5)])
    task = registry.get("task", "helmet/rag_nq")(limit=3)
    assert task.samples_per_length(ctx) == 3 and task.max_new_tokens == 20
    s = task.generate(length=8192, index=0, seed=0, ctx=ctx)
    assert s.prompt.startswith("Use the given documents to write a concise and short answer")
    assert s.prompt.count("\nAnswer: Author") == 2 and s.prompt.endswith("\nAnswer:")  # two demonstrations, then the query
    assert s.meta["k"] == 50 and s.meta["template"] == "plain" and s.meta["truncated_tokens"] == 0
    assert sorted(p.name for p in task.data_files(ctx)) == ["nq-dev-multikilt_1000_k50_dep6.jsonl",
                                                            "nq-train-multikilt_1000_k3_dep6.jsonl"]  # the cache's key
    assert task.score(f"{s.answers[0]}\nmore", s) == 1.0 and task.score("nobody", s) == 0.0
    short = registry.get("task", "helmet/rag_nq")(k=50, limit=3, shots=0).generate(length=80, index=0, seed=0, ctx=ctx)
    assert short.meta["truncated_tokens"] > 0 and short.prompt_tokens + 20 <= 80  # the passages' end is cut
    assert "Document (Title: Book" in short.prompt and "Unrelated" not in short.prompt
    with pytest.raises(ConfigError, match="starts at 8192 tokens"):
        task.generate(length=4096, index=0, seed=0, ctx=ctx)
    with pytest.raises(OfflineError, match="data/kilt/nq-dev-multikilt_1000_k105_dep6.jsonl under data_dir/helmet"):
        task.generate(length=16384, index=0, seed=0, ctx=ctx)  # not local: the hub, which is offline here


def test_popqa_keeps_rare_subjects_only(ctx, tmp_path):
    kilt = tmp_path / "helmet" / "data" / "kilt"
    rows = [{**_qa(i), "s_pop": pop} for i, pop in enumerate((10, 5000, 200))]
    _jsonl(kilt / "popqa_test_1000_k50_dep6.jsonl", rows)
    _jsonl(kilt / "popqa_test_1000_k3_dep6.jsonl", rows)
    task = registry.get("task", "helmet/rag_popqa")()
    got = [task.generate(length=8192, index=i, seed=0, ctx=ctx).meta["id"] for i in range(2)]
    assert sorted(got) == ["q0", "q2"]  # log10(5000) >= 3 is dropped
    with pytest.raises(ConfigError, match="out of range"):
        task.generate(length=8192, index=2, seed=0, ctx=ctx)


def _rerank(qid, labels, title=False):
    ctxs = [{"id": str(i), "text": f"Passage {i} about {qid}.", "label": lab, **({"title": f"T{i}"} if title else {})}
            for i, lab in enumerate(labels)]
    return {"qid": qid, "query": f"query {qid}", "ctxs": ctxs}


def test_rerank_prompt_gold_ranking_and_ndcg(ctx, tmp_path):
    marco = tmp_path / "helmet" / "data" / "msmarco"
    _jsonl(marco / "test_reranking_data_k50_dep3.jsonl", [_rerank("a", [0, 3, 1]), _rerank("b", [1, 0, 0])])
    _jsonl(marco / "test_reranking_data_k10_dep3.jsonl", [_rerank("a", [1, 0]), _rerank("c", [0, 2]), _rerank("d", [1, 0])])
    task = registry.get("task", "helmet/rerank_msmarco")()
    assert task.max_new_tokens == 200
    s = next(x for x in (task.generate(length=8192, index=i, seed=0, ctx=ctx) for i in range(2)) if x.meta["qid"] == "a")
    assert s.answers == ("1 > 2 > 0",) and s.meta["qrels"] == {"0": 0, "1": 3, "2": 1}
    assert "[ID: 1] Document: Passage 1 about a." in s.prompt and s.prompt.endswith("\n\nQuery: query a\nRanking:")
    assert s.prompt.count("\nRanking: ") == 3 and "query a\nRanking: 0 > 1" not in s.prompt  # 2 demos, never itself
    assert task.score("[ID: 1] > [ID: 2] > [ID: 0]", s) == 1.0 and task.score("0 > 2 > 1", s) == pytest.approx((1 / math.log2(3) + 3 / 2) / (3 + 1 / math.log2(3)), abs=5e-6)


def test_icl_maps_labels_to_integers_with_balanced_demonstrations(ctx, tmp_path):
    train = [{"text": f"example {y} {n}", "label": y} for y in range(3) for n in range(4)]
    test = [{"text": f"query {y} {n}", "label": y} for y in range(3) for n in range(2)]
    _jsonl(tmp_path / "banking77" / "train.jsonl", train)
    _jsonl(tmp_path / "banking77" / "test.jsonl", test)
    task = registry.get("task", "icl/banking77")(shots=6, limit=3)
    assert task.samples_per_length(ctx) == 3  # 6 > limit: a label-balanced draw of 3
    samples = [task.generate(length=2048, index=i, seed=0, ctx=ctx) for i in range(3)]
    assert all(s.prompt.endswith("\nlabel:") and s.prompt.count("\nlabel: ") == 6 for s in samples)
    assert all(s.answers[0].isdigit() and int(s.answers[0]) < 77 for s in samples)
    s = samples[0]
    assert task.score(f" {s.answers[0]}", s) == 1.0 and task.score(f"label: {int(s.answers[0]) + 1}", s) == 0.0
    assert registry.get("task", "icl/trec_fine")().shots_for(131072) == 6400
    with pytest.raises(ConfigError, match="starts at 8192"):
        task.__class__("nlu", task.Args()).shots_for(4096)


def test_shipped_helmet_suite_builds():
    from ctxbench.harness.core.config import build_task, load_suite

    suite = load_suite("helmet")
    names = [build_task(spec).name for spec in suite.tasks]
    assert {"helmet/rag_nq", "helmet/rerank_msmarco", "icl/nlu", "icl/trec_coarse"} <= set(names)
    assert suite.lengths == [8192, 16384, 32768, 65536, 131072]
