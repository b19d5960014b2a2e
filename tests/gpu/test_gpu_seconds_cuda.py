"""GPU-seconds on CUDA (issue 35 item 2): the hf backend's predictions carry the device time of their generate call,
each its share (one device: the model sits on one), and a CPU run carries none (tests/test_cost_rows.py)."""

from __future__ import annotations

import pytest

from tests.gpu.test_hf_cuda import prompts

pytestmark = pytest.mark.gpu


def test_hf_on_cuda_reports_gpu_seconds(tiny_llama_dir):
    from ctxbench.harness.backends.hf import HFBackend

    backend = HFBackend(model=tiny_llama_dir, dtype="float32")
    assert backend.device == "cuda" and backend.padded
    preds = backend.generate(prompts(backend.tokenizer, [9, 17, 33, 65]))
    assert all(p.error is None and p.gpu_seconds is not None and p.gpu_seconds > 0 for p in preds)
    assert all(p.gpu_seconds == pytest.approx(p.seconds) for p in preds)
