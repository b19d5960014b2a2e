"""The real embedded model (SmolLM2-135M) through lm-eval: log-likelihoods, and an MMLU run on the board."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

PAIRS = [
    ("The capital of France is", " Paris"),  # greedy
    ("The capital of France is ", "Paris"),  # the trailing space moves to the continuation
    ("Question: 2+2=?\nAnswer:", " 5"),  # not greedy
    ("Once upon a time", " there was a little girl who lived in a village"),  # many tokens
    ("", "Hello world"),  # empty context: conditioned on the prefix token
]


def _reference(model, tok, context: str, continuation: str, prefix: int) -> tuple[float, bool]:
    """log P(continuation | context) straight from the model: encode context and context+continuation, score the tail."""
    import torch

    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole = tok(context + continuation)["input_ids"] if context else [prefix] + tok(continuation)["input_ids"]
    n_ctx = len(tok(context)["input_ids"]) if context else 1
    with torch.no_grad():
        logits = model(torch.tensor([whole])).logits[0].float()
    logprobs = torch.log_softmax(logits[:-1], dim=-1)  # position i predicts token i + 1
    cont = torch.tensor(whole[n_ctx:])
    rows = logprobs[n_ctx - 1:]
    return float(rows.gather(1, cont[:, None]).sum()), bool((rows.argmax(-1) == cont).all())


def test_adapter_loglikelihood_matches_transformers(smol_backend):
    import transformers
    from lm_eval.api.instance import Instance

    from ctxbench.tasks.lmeval.adapter import CtxbenchLM

    model = smol_backend.model  # the raw transformers model (float32); tokenizer loaded afresh
    tok = transformers.AutoTokenizer.from_pretrained(smol_backend.path)
    lm = CtxbenchLM(smol_backend)
    got = lm.loglikelihood([Instance("loglikelihood", {}, p, i) for i, p in enumerate(PAIRS)])
    want = [_reference(model, tok, c, x, tok.bos_token_id) for c, x in PAIRS]
    for pair, (ll, greedy), (ll_ref, greedy_ref) in zip(PAIRS, got, want):
        assert ll == pytest.approx(ll_ref, abs=2e-3), pair
        assert greedy == greedy_ref, pair
    assert [g for _, g in got[:3]] == [True, True, False]
    assert got[0][0] == pytest.approx(got[1][0], abs=1e-4)  # same tokens either way


def test_rolling_loglikelihood_covers_every_token_once(smol_backend):
    import torch

    text = "The quick brown fox jumps over the lazy dog. " * 6
    ids = smol_backend.tok_encode(text)
    with torch.no_grad():
        logits = smol_backend.model(torch.tensor([[smol_backend.prefix_token_id] + ids])).logits[0].float()
    full = float(torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(ids)[:, None]).sum())
    assert smol_backend.loglikelihood_rolling([text])[0] == pytest.approx(full, abs=2e-3)  # one window
    saved = smol_backend.context_length
    smol_backend.context_length = 16  # several windows: a different (shorter) conditioning, every token once
    try:
        windowed = smol_backend.loglikelihood_rolling([text])[0]
    finally:
        smol_backend.context_length = saved
    assert windowed < 0 and windowed != pytest.approx(full, abs=1e-3)


def test_mmlu_through_lm_eval_is_stored_and_on_the_board(tmp_path, tiny_mmlu_paths):
    import pandas as pd
    from typer.testing import CliRunner

    from ctxbench.harness.cli import app

    runs, board = tmp_path / "runs", tmp_path / "board"
    args = ["lmeval", "--model", "smollm2-135m", "--tasks", "mmlu", "--store", str(runs), "--no-builtin-tasks",
            "--backend-arg", "dtype=float32", "--backend-arg", "device=cpu"]
    for p in tiny_mmlu_paths:
        args += ["--include-path", p]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "MMLU STEM" in res.output
    (run,) = runs.iterdir()
    rows = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 9 and all(r["score"] in (0.0, 1.0) and r["length"] == 0 for r in rows)
    assert {r["category"] for r in rows} == {"STEM", "humanities", "social sciences", "other"}
    agg = json.loads((run / "lmeval_results.json").read_text())["tasks"]["lmeval/mmlu"]
    acc = agg["groups"]["mmlu"]["metrics"]["acc,none"]
    assert acc["value"] == pytest.approx(sum(r["score"] for r in rows) / 9)
    assert isinstance(acc["stderr"], float)
    assert set(agg["mmlu_categories"]) == {"STEM", "humanities", "social sciences", "other"}

    res = CliRunner().invoke(app, ["board", "build", "--store", str(runs), "--out", str(board)])
    assert res.exit_code == 0, res.output
    csv = pd.read_csv(board / "results.csv")
    assert set(csv["length"]) == {0} and len(csv) == 4 and all(csv["task"].str.startswith("lmeval/mmlu_"))
    doc = json.loads((board / "results.json").read_text())
    assert len([t for t in doc["short_context"]["tasks"] if t["task"].startswith("lmeval/mmlu_")]) == 4
    cats = {c["category"] for c in doc["short_context"]["categories"]}
    assert cats == {"STEM", "humanities", "social sciences", "other"}
    assert "Short-context tasks" in (board / "index.html").read_text()
