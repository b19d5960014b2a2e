"""The HF backend on CUDA (device auto): bf16, left-padded batches of 16 that decode as one-at-a-time does,
log-likelihoods and token log-probs that match a direct transformers computation, and a `ctxbench score` run."""

from __future__ import annotations

import json
import math

import pytest

from ctxbench.harness.core.types import LogprobRequest, Request

pytestmark = pytest.mark.gpu

WORDS = ("river stone apple night window seven garden copper violin mountain yellow quiet harbor lemon "
         "paper tiger orbit candle meadow silver").split()


def prompts(tok, lengths: list[int]) -> list[Request]:
    """Prompts of exactly these token lengths, each a different word sequence."""
    out = []
    for i, n in enumerate(lengths):
        text = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(n + 8))
        ids = tok(text, add_special_tokens=False)["input_ids"][:n]
        prompt = tok.decode(ids)
        assert len(tok(prompt, add_special_tokens=False)["input_ids"]) == n
        out.append(Request(f"s#{i}", prompt, max_new_tokens=8, prompt_tokens=n))
    return out


class Recorder:
    """Wraps model.generate: also asks for the per-step scores, keeps (prompt width, sequences, scores) per call."""

    def __init__(self, model):
        self.inner, self.calls = model.generate, []

    def __call__(self, **kw):
        out = self.inner(**kw, output_scores=True, return_dict_in_generate=True)
        self.calls.append((kw["input_ids"].shape[1], kw["attention_mask"].clone(), out.sequences, out.scores))
        return out.sequences


def greedy_rows(backend, requests, monkeypatch) -> tuple[list[list[int]], list[list]]:
    """(new token ids up to the first stop token, per-step logits) of each request, from the backend's own generate."""
    rec = Recorder(backend.model)
    monkeypatch.setattr(backend.model, "generate", rec)
    backend.generate(requests)
    monkeypatch.undo()
    rows, scores = [], []
    for width, _, seqs, steps in rec.calls:
        for r in range(seqs.shape[0]):
            toks = seqs[r, width:].tolist()
            n = next((j + 1 for j, t in enumerate(toks) if t in backend.stop_ids), len(toks))
            rows.append(toks[:n])
            scores.append([s[r].float() for s in steps])
    return rows, scores


def assert_same_greedy(batched, singles, single_scores, *, rel_tie: float) -> int:
    """Token ids equal, except where the one-at-a-time run's top two logits were within rel_tie·|top| of each other
    at the first differing step (a tie that kernel rounding may break either way). Returns the rows exactly equal."""
    exact = 0
    for b, s, sc in zip(batched, singles, single_scores):
        if b == s:
            exact += 1
            continue
        k = next(j for j, (x, y) in enumerate(zip(b, s)) if x != y)
        top2 = sc[k].topk(2).values
        gap, scale = float(top2[0] - top2[1]), abs(float(top2[0]))
        assert gap <= rel_tie * max(scale, 1.0), f"step {k}: batched {b} vs single {s}; top-2 gap {gap:.4f} is no tie"
    return exact


@pytest.mark.parametrize("dtype,rel_tie", [("auto", 0.03), ("float32", 1e-4)])
def test_padded_batches_decode_as_one_at_a_time(tiny_llama_dir, tokenizer, monkeypatch, dtype, rel_tie):
    import torch

    from ctxbench.harness.backends.hf import HFBackend

    backend = HFBackend(model=tiny_llama_dir, dtype=dtype)
    want = "bfloat16" if dtype == "auto" else dtype
    assert backend.device == "cuda" and backend.dtype == want and backend.model.dtype == getattr(torch, want)
    assert backend.batch_size == 16 and backend.padded and backend.info()["batching"] == "padded"
    reqs = prompts(backend.tokenizer, [5, 9, 13, 17, 23, 31, 40, 48, 57, 64, 70, 77, 85, 91, 99, 120])
    rec = Recorder(backend.model)
    monkeypatch.setattr(backend.model, "generate", rec)
    preds = backend.generate(reqs)
    monkeypatch.undo()
    ((width, mask, _, _),) = rec.calls  # one padded batch of 16
    assert width == 120 and not bool(mask.all()) and bool(mask[:, -1].all())  # left padding
    assert [p.sample_id for p in preds] == [r.sample_id for r in reqs]
    assert all(p.prompt_tokens == r.prompt_tokens and p.timing == "batch-share" for p, r in zip(preds, reqs))

    batched, _ = greedy_rows(backend, reqs, monkeypatch)
    singles, single_scores = [], []
    for r in reqs:
        rows, sc = greedy_rows(backend, [r], monkeypatch)
        singles += rows
        single_scores += sc
    exact = assert_same_greedy(batched, singles, single_scores, rel_tie=rel_tie)
    print(f"{want}: {exact}/16 batched rows equal to one-at-a-time")
    if dtype == "float32":
        assert exact == 16


def reference_logprobs(model_dir: str, dtype, windows: list[list[int]]):
    """Per window, from a direct, unpadded, one-sequence-at-a-time forward pass with full logits: log P(ids[t] | ids[:t])
    for t >= 1 (log-softmax in float64) and the argmax token at each position."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to("cuda").eval()
    out = []
    with torch.no_grad():
        for ids in windows:
            logits = model(input_ids=torch.tensor([ids[:-1]], device="cuda")).logits[0].double()
            target = torch.tensor(ids[1:], device=logits.device)
            lp = torch.log_softmax(logits, dim=-1).gather(1, target[:, None]).squeeze(1)
            out.append((lp.cpu(), logits.argmax(-1).cpu()))
    return out


PAIRS = [("The river ran past the", " stone"), ("Question: what is seven plus one?\nAnswer:", " eight"),
         ("Question: what is seven plus one?\nAnswer:", " nine"), ("Question: what is seven plus one?\nAnswer:", " ten"),
         ("", "A whole sentence scored from the prefix token alone."), ("copper violin " * 30, "mountain yellow quiet harbor"),
         ("meadow " * 3, " silver candle orbit"), ("A " * 200, "long context, then a short continuation of several words")]
PAIRS += [(" ".join(WORDS[i:] + WORDS[:i]), " " + WORDS[(i * 5) % len(WORDS)]) for i in range(12)]  # 20: two batches


@pytest.mark.parametrize("dtype,atol", [("auto", 0.05), ("float32", 1e-3)])
def test_loglikelihood_matches_a_direct_forward_pass(tiny_llama_dir, dtype, atol):
    import torch

    from ctxbench.harness.backends.hf import HFBackend

    backend = HFBackend(model=tiny_llama_dir, dtype=dtype)
    assert backend.score_batch_size == 16
    pairs = [backend.encode_pair(c, x) for c, x in PAIRS]
    got = backend.loglikelihood(PAIRS)
    ref_dtype = torch.float32 if dtype == "float32" else torch.bfloat16
    for ref_in in ({torch.float32} | {ref_dtype}):
        refs = reference_logprobs(tiny_llama_dir, ref_in, [ctx + cont for ctx, cont in pairs])
        worst = 0.0
        for (ctx, cont), (lp, top), (ll, greedy) in zip(pairs, refs, got):
            want = float(lp[len(ctx) - 1:].sum())
            # bf16 backend against the fp32 model: rounding of bf16 weights and activations, per scored token
            tol = atol * len(cont) * (3 if (dtype == "auto" and ref_in == torch.float32) else 1)
            assert abs(ll - want) <= tol, (ctx[-5:], cont, ll, want)
            worst = max(worst, abs(ll - want) / len(cont))
            if ref_in == ref_dtype and dtype == "float32":
                assert greedy == bool((top[len(ctx) - 1:] == torch.tensor(cont)).all())
        print(f"loglikelihood {dtype} vs direct {ref_in}: worst per-token |diff| {worst:.2e}")
    assert math.isfinite(sum(ll for ll, _ in got))


@pytest.mark.parametrize("dtype,atol", [("auto", 0.05), ("float32", 1e-3)])
def test_token_logprobs_match_a_direct_forward_pass(tiny_llama_dir, tokenizer, dtype, atol):
    import torch

    from ctxbench.harness.backends.hf import HFBackend

    backend = HFBackend(model=tiny_llama_dir, dtype=dtype)
    text = " ".join(WORDS * 40)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    windows = [ids[i * 13: i * 13 + n] for i, n in enumerate([40, 64, 128, 200, 333, 512, 700, 1024, 77, 90, 150, 260,
                                                               310, 415, 600, 810, 999, 64, 128, 256])]
    reqs = [LogprobRequest(f"w#{i}", tuple(w), score_from=1 + (i * 11) % (len(w) // 2)) for i, w in enumerate(windows)]
    got = backend.token_logprobs(reqs)  # 20 windows: two batches of 16 on CUDA, right-padded, longest first
    ref_dtype = torch.float32 if dtype == "float32" else torch.bfloat16
    refs = reference_logprobs(tiny_llama_dir, ref_dtype, windows)
    worst = mean = 0.0
    for r, (lp, _), out in zip(reqs, refs, got):
        want = lp[r.score_from - 1:]
        have = torch.tensor(out.logprobs, dtype=torch.float64)
        assert out.sample_id == r.sample_id and have.shape == want.shape
        diff = (have - want).abs()
        worst, mean = max(worst, float(diff.max())), max(mean, float(diff.mean()))
        assert float(diff.max()) <= atol, (r.sample_id, float(diff.max()))
        assert float(diff.mean()) <= atol / 3, (r.sample_id, float(diff.mean()))
    print(f"token_logprobs {dtype} vs direct {ref_dtype}: max |diff| {worst:.2e}, worst window mean {mean:.2e}")


SUITE = """name: gpu-smoke
lengths: [512, 1024]
samples: 2
tasks: [ruler/niah_single_1, ruler/niah_single_2]
"""


def test_score_command_runs_a_ruler_suite_on_cuda(tiny_llama_dir, tmp_path, data_dir, ctxbench):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    code, out, err = ctxbench("score", "--model", tiny_llama_dir, "--suite", str(suite), "--backend", "hf",
                              "--store", str(tmp_path / "runs"), "--data-dir", str(data_dir))
    assert code == 0, err[-2000:]
    assert "ruler/niah_single_1" in out and "average" in out
    (samples,) = (tmp_path / "runs").glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 8 and all(r["error"] is None and r["score"] is not None for r in rows)
    for r in rows:
        assert r["prompt_tokens"] + r["max_new_tokens"] <= r["length"] and r["prompt_tokens"] > r["length"] // 2
        assert r["seconds"] > 0
    (record,) = (tmp_path / "runs").glob("*/record.json")
    args = json.loads(record.read_text())["backend_args"]
    assert (args["device"], args["dtype"], args["batch_size"], args["batching"]) == ("cuda", "bfloat16", 16, "padded")
