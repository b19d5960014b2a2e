"""The HF backend's CPU batching, per-sample timing and defaults, on a tiny random model (no download)."""

from __future__ import annotations

import time

import pytest

from ctxbench.harness.core.types import Request


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, smol_tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(smol_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                         eos_token_id=smol_tokenizer.eos_token_id, bos_token_id=smol_tokenizer.bos_token_id)
    path = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(config).save_pretrained(path)
    smol_tokenizer.save_pretrained(path)
    return str(path)


def requests_of(tok, lengths: list[int]) -> list[Request]:
    """Prompts of exactly these token lengths."""
    ids = tok(" ".join(["alpha"] * 200), add_special_tokens=False)["input_ids"]
    out = []
    for i, n in enumerate(lengths):
        prompt = tok.decode(ids[:n])
        assert len(tok(prompt, add_special_tokens=False)["input_ids"]) == n
        out.append(Request(f"s#{i}", prompt, max_new_tokens=4, prompt_tokens=n))
    return out


def test_cpu_batches_only_equal_lengths_and_times_each_sample(tiny_model_dir, monkeypatch):
    from ctxbench.harness.backends.hf import HFBackend

    backend = HFBackend(model=tiny_model_dir, device="cpu", batch_size=4, threads=1, dtype="float32", batched_decode=False)
    assert not backend.padded and backend.info()["batching"] == "equal-length"
    calls = []
    inner = backend.model.generate

    def spy(**kw):
        calls.append(tuple(kw["input_ids"].shape))
        assert bool(kw["attention_mask"].all())  # never padded
        return inner(**kw)

    monkeypatch.setattr(backend.model, "generate", spy)
    reqs = requests_of(backend.tokenizer, [10, 10, 12, 10])
    preds = backend.generate(reqs)
    assert sorted(calls) == [(1, 12), (3, 10)]
    assert [p.sample_id for p in preds] == [r.sample_id for r in reqs]
    for p, r in zip(preds, reqs):
        assert p.prompt_tokens == r.prompt_tokens
        assert p.timing == ("sample" if r.prompt_tokens == 12 else "batch-share")
        assert p.prefill_seconds > 0 and p.decode_seconds >= 0
        assert p.prefill_seconds + p.decode_seconds == pytest.approx(p.seconds, rel=1e-6)


def test_cpu_defaults_batched_decode_measured_dtype_free_threads(tiny_model_dir, monkeypatch, tmp_path):
    from ctxbench.harness.backends.hf import HFBackend
    from ctxbench.harness.core.cores import usable_cores

    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path))  # a fresh machine verdict
    backend = HFBackend(model=tiny_model_dir, device="cpu")
    info = backend.info()
    assert backend.batch_size == 8 and 1 <= backend.threads <= usable_cores()  # decoded together (test_batched_decode.py)
    measured = info["dtype_measured"]["seconds"]
    assert backend.dtype == min(measured, key=measured.get)  # the faster of the two on this CPU
    preds = backend.generate(requests_of(backend.tokenizer, [9, 11]))
    assert all(p.timing == "batch-share" and p.prefill_seconds > 0 for p in preds)


def test_default_threads_leave_busy_cores_alone(monkeypatch):
    from ctxbench.harness.core import cores

    monkeypatch.setattr(cores, "usable_cores", lambda: 8)
    monkeypatch.setattr(cores.time, "sleep", lambda s: None)
    # the load average is ignored where /proc/stat answers: a phantom load of 1.4 on an idle machine
    monkeypatch.setattr(cores.os, "getloadavg", lambda: (1.4, 0.0, 0.0))
    for idle_share, want in ((1.0, 8), (0.3, 2), (0.0, 1), (0.55, 4)):
        snaps = iter([(1000, 500, 8), (1000 + 800, 500 + int(800 * idle_share), 8)])
        monkeypatch.setattr(cores, "cpu_times", lambda: next(snaps))
        assert cores._measure_threads() == want, idle_share
    monkeypatch.setattr(cores, "cpu_times", lambda: None)  # no /proc/stat: the load average decides
    monkeypatch.setattr(cores.os, "getloadavg", lambda: (0.2, 0.0, 0.0))
    assert cores._measure_threads() == 8
    monkeypatch.setattr(cores.os, "getloadavg", lambda: (5.6, 0.0, 0.0))
    assert cores._measure_threads() == 2
    monkeypatch.setattr(cores.os, "getloadavg", lambda: (30.0, 0.0, 0.0))
    assert cores._measure_threads() == 1


def test_default_threads_measure_at_most_once_a_minute(monkeypatch):
    """A run's plan and its build both ask; each measurement waits half a second, so one stands for a minute."""
    from ctxbench.harness.core import cores

    calls = []
    monkeypatch.setattr(cores, "_last", None)
    monkeypatch.setattr(cores, "_measure_threads", lambda: calls.append(1) or len(calls))
    clock = iter([100.0, 130.0, 161.0, 161.5])
    monkeypatch.setattr(cores.time, "monotonic", lambda: next(clock))
    assert [cores.default_threads() for _ in range(4)] == [1, 1, 2, 2]


def test_busy_cores_sees_a_spinning_process():
    """A real busy loop on one core shows up in /proc/stat (where it exists), whatever the load average says."""
    import multiprocessing as mp

    from ctxbench.harness.core import cores

    if cores.cpu_times() is None:
        pytest.skip("no /proc/stat here")
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    spinner = ctx.Process(target=_spin, args=(stop,), daemon=True)
    spinner.start()
    try:
        time.sleep(0.3)
        busy = cores.busy_cores(window=1.0)
    finally:
        stop.set()
        spinner.join(5)
    assert busy is not None and busy >= 0.7  # at least most of the spinning core, plus whatever else runs


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def test_sampling_repeats_and_the_thinking_budget(tiny_model_dir):
    """--gen-kwargs samples (seeded: a repeat is its own reproducible draw) and the thinking budget ends an open
    <think> block: </think> is forced as the budget's last tokens and the answer budget follows (issue 25)."""
    import dataclasses

    from ctxbench.harness.backends.hf import HFBackend

    backend = HFBackend(model=tiny_model_dir, device="cpu", threads=1, dtype="float32")
    (base,) = requests_of(backend.tokenizer, [10])
    sampled = dataclasses.replace(base, max_new_tokens=12, sampling=(("seed", 1), ("temperature", 1.5)))
    first, again = backend.generate([sampled]), backend.generate([sampled])
    other = backend.generate([dataclasses.replace(sampled, sample_id="s#0~1", repeat=1)])
    assert first[0].text == again[0].text != other[0].text
    thinking = dataclasses.replace(base, prompt=base.prompt + "<think>\n", prompt_tokens=None, max_new_tokens=6,
                                   thinking=True, max_thinking_tokens=10)
    (pred,) = backend.generate([thinking])
    assert "</think>" in pred.text and pred.reasoning_tokens is not None and pred.reasoning_tokens <= 10
    assert pred.generated_tokens <= 16
