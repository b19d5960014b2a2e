"""Long-context perplexity: the HF backend's numbers equal a direct transformers computation, sliding windows follow
Press et al.'s recipe, a repeated passage is predicted better the second time, sources read local files, and a backend
without prompt log-probabilities is refused in one line before any work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ctxbench.harness.core.config import Suite
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.run.runner import RunPlan, run

ARGS = {"dtype": "float32", "threads": 1}


@pytest.fixture(scope="module")
def smol():
    """SmolLM2 (float32) and its tokenizer, loaded directly with transformers: the reference computation."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ctxbench.harness.core.models import materialize, resolve

    torch.set_num_threads(1)
    path = materialize(resolve("smollm2-135m"))
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(path)


def direct_nll(model, ids: list[int], *, length: int, stride: int) -> tuple[float, int]:
    """Summed NLL and scored tokens by the sliding-window recipe of the transformers perplexity guide (labels -100
    outside each window's new tokens); with stride >= len(ids) it is one full window."""
    import torch

    total, count, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + length, len(ids))
        window = torch.tensor([ids[begin:end]])
        labels = window.clone()
        labels[:, : -(end - prev_end)] = -100
        with torch.no_grad():
            loss = model(input_ids=window, labels=labels).loss
        n = int((labels[:, 1:] != -100).sum())
        total, count, prev_end = total + float(loss) * n, count + n, end
        if end == len(ids):
            break
    return total, count


def essay_ids(tok, data_dir: Path, name: str) -> list[int]:
    return tok((data_dir / "pg_essays" / name).read_text(encoding="utf-8", errors="replace"), add_special_tokens=False)["input_ids"]


def test_full_and_sliding_perplexity_equal_a_direct_transformers_computation(tmp_path, smol, data_dir):
    model, tok = smol
    # windows of 64 (the shortest length): the full task's one, and four of the sliding task over 120 tokens
    suite = Suite(name="ppl", lengths=[64], samples=1, tasks=[
        {"task": "ppl/full", "args": {"source": "essays", "min_tokens": 200, "documents": 2}},
        {"task": "ppl/sliding", "args": {"source": "essays", "min_tokens": 200, "documents": 2, "stride": 24, "span": 120}}])
    outcome = run(RunPlan(suite, "smollm2-135m", "hf", ARGS, tmp_path, data_dir))
    rows = list(outcome.store.latest().values())
    assert (outcome.planned, outcome.done, outcome.failed) == (4, 4, 0) and all(r["score"] is None for r in rows)
    for r in rows:
        ids = [tok.bos_token_id] + essay_ids(tok, data_dir, r["meta"]["doc_id"])
        if r["task"] == "ppl/full":
            want, n = direct_nll(model, ids[:64], length=64, stride=64)
            assert r["windows"] == 1 and r["tokens"] == n == 63
        else:
            want, n = direct_nll(model, ids[:121], length=64, stride=24)
            assert r["meta"]["stride"] == 24 and r["tokens"] == n == 120 and r["windows"] == 4
        assert math.exp(r["nll"] / r["tokens"]) == pytest.approx(math.exp(want / n), rel=1e-4)
        assert sum(b[2] for b in r["buckets"]) == pytest.approx(r["nll"]) and sum(b[3] for b in r["buckets"]) == r["tokens"]
        assert [b[0] for b in r["buckets"]] == [2 ** k for k in range(len(r["buckets"]))]  # log2 buckets from position 1


def test_a_planted_repeated_passage_has_lower_loss_the_second_time(tmp_path, smol, data_dir):
    _, tok = smol
    words = [(data_dir / "pg_essays" / f).read_text().split() for f in sorted(p.name for p in (data_dir / "pg_essays").glob("*.txt"))[:3]]
    filler_a, passage, filler_b = (" ".join(w[:40]) for w in words)  # the copy's loss is ~8% of the first's
    pieces = [filler_a, passage, filler_b, passage]
    text = "\n\n".join(pieces)
    # token offset of each piece (the separator belongs to the piece after it)
    starts = [len(tok("\n\n".join(pieces[:k]), add_special_tokens=False)["input_ids"]) if k else 0 for k in range(4)]
    total = len(tok(text, add_special_tokens=False)["input_ids"])
    doc = tmp_path / "docs.jsonl"
    doc.write_text(json.dumps({"id": "planted", "text": text}) + "\n")
    edges = [1, starts[1] + 2, starts[2], starts[3] + 2, total]  # first and second copy, minus their first tokens
    suite = Suite(name="rep", lengths=[total], samples=1, tasks=[
        {"task": "ppl/full", "args": {"source": "jsonl", "path": str(doc), "min_tokens": total, "prefix": "none",
                                      "buckets": edges}}])
    (row,) = run(RunPlan(suite, "smollm2-135m", "hf", ARGS, tmp_path / "runs", data_dir)).store.latest().values()
    loss = {b[0]: b[2] / b[3] for b in row["buckets"]}
    first, second = loss[edges[1]], loss[edges[3]]
    assert second < 0.5 * first, (first, second)  # the copy is predicted from context


def test_sources_read_local_files(tmp_path, gen_ctx, data_dir):
    from ctxbench.harness.core.config import TaskSpec, build_task

    jl = tmp_path / "d.jsonl"
    jl.write_text("".join(json.dumps({"id": f"doc{i}", "text": "word " * (50 + 40 * i)}) + "\n" for i in range(4)))
    task = build_task(TaskSpec(task="ppl/full", args={"source": "jsonl", "path": str(jl), "min_tokens": 100}))
    assert sorted(d for d, _ in task.documents(gen_ctx)) == ["doc2", "doc3"] and task.samples_per_length(gen_ctx) == 2
    pg = tmp_path / "pg19.jsonl"  # a local copy of a hub corpus, in its own format
    pg.write_text(json.dumps({"text": "Call me Ishmael. " * 100}) + "\n")
    book = build_task(TaskSpec(task="ppl/sliding", args={"source": "pg19", "path": str(pg), "min_tokens": 64, "stride": 16}))
    assert [d for d, _ in book.documents(gen_ctx)] == ["pg19.jsonl:1"]
    code = build_task(TaskSpec(task="ppl/full", args={"source": "code", "min_tokens": 512, "documents": 3}))
    assert len(code.documents(gen_ctx)) == 3 and all(d.endswith(".py") for d, _ in code.documents(gen_ctx))
    essays = build_task(TaskSpec(task="ppl/full", args={"source": "essays", "min_tokens": 1024, "documents": 5}))
    assert all(d.endswith(".txt") for d, _ in essays.documents(gen_ctx))
    with pytest.raises(ConfigError, match="raise min_tokens"):
        essays.generate(length=2048, index=0, seed=0, ctx=gen_ctx)
    with pytest.raises(ConfigError, match="no document of jsonl has min_tokens=10000"):
        build_task(TaskSpec(task="ppl/full", args={"source": "jsonl", "path": str(jl), "min_tokens": 10000})).documents(gen_ctx)


def test_a_backend_without_prompt_logprobs_is_refused_before_any_work(tmp_path, data_dir):
    suite = Suite(name="p", lengths=[128], samples=1, tasks=[{"task": "ppl/full", "args": {"source": "essays", "min_tokens": 128}}])
    with pytest.raises(ConfigError) as e:
        run(RunPlan(suite, "smollm2-135m", "echo", {}, tmp_path, data_dir))
    assert str(e.value) == "backend 'echo': no prompt logprobs support, which task ppl/full needs"
    assert not list(tmp_path.rglob("samples.jsonl"))
