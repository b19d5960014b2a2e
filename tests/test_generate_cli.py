"""`ctxbench generate` output, and the on-disk dataset cache."""

import json

from ctxbench.harness.core import datasets, registry


def test_generate_writes_exact_prompts(tmp_path, data_dir, smol_tokenizer, ctxbench):
    """Through the CLI's main() in this process (the `ctxbench` fixture): the output file is what is checked."""
    out = tmp_path / "s.jsonl"
    code, _, stderr = ctxbench("generate", "--task", "ruler/niah_single_2", "--length", "2048", "--samples", "3",
                               "--tokenizer", "smollm2-135m", "--out", str(out), "--data-dir", str(data_dir))
    assert code == 0, stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["id"] for x in rows] == [f"ruler/niah_single_2@2048#{i}" for i in range(3)]
    for x in rows:
        assert {"id", "task", "length", "depths", "prompt", "answers", "prompt_tokens"} <= set(x)
        assert x["prompt"].endswith("mentioned in the provided text is")
        assert len(smol_tokenizer(x["prompt"], add_special_tokens=False)["input_ids"]) == x["prompt_tokens"]
        assert x["prompt_tokens"] + x["max_new_tokens"] <= 2048
        assert len(x["depths"]) == 1 and 0 <= x["depths"][0] <= 100


def test_cache_hit_does_not_regenerate(gen_ctx, monkeypatch, tmp_path):
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path))  # datasets only; the model is already materialised
    task = registry.get("task", "ruler/niah_single_1")()
    first = datasets.generate(task, length=1024, indices=range(3), seed=7, ctx=gen_ctx)
    assert len(list((tmp_path / "datasets").glob("*.jsonl"))) == 1

    def boom(**_):
        raise AssertionError("regenerated a cached sample")

    monkeypatch.setattr(task, "generate", boom)
    again = datasets.generate(task, length=1024, indices=[2, 0, 1], seed=7, ctx=gen_ctx)
    assert [s.to_json() for s in again] == [first[2].to_json(), first[0].to_json(), first[1].to_json()]
    monkeypatch.undo()
    other = datasets.generate(task, length=1024, indices=[0], seed=8, ctx=gen_ctx)  # another seed is another key
    assert other[0].prompt != first[0].prompt
