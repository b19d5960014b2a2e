"""The vllm backend's token account (issue 35 item 2), on the fake engine of test_vllm_backend: each prediction
carries the prompt tokens vLLM served from its prefix cache and its GPU-seconds (its share of the generate call's
wall time times every device the engines hold)."""

from __future__ import annotations

from tests.serving.test_vllm_backend import FakeLLM, chat_request, fake_vllm  # noqa: F401 - the fixture


def test_predictions_carry_cached_tokens_and_gpu_seconds(fake_vllm, smol_tokenizer):  # noqa: F811
    from ctxbench.harness.core import registry

    b = registry.get("backend", "vllm")(model="smollm2-135m", tensor_parallel_size=2, pipeline_parallel_size=2)
    assert len(FakeLLM.instances) == 1 and b.devices == 4
    preds = b.generate([chat_request(smol_tokenizer, f"t@1#{i}", f"Question {i}?", max_new=4) for i in range(3)])
    assert [p.cached_tokens for p in preds] == [5, 5, 5]  # the fake engine's num_cached_tokens
    assert all(p.gpu_seconds is not None and p.gpu_seconds == 4 * p.seconds for p in preds)
    assert all(p.token_source == "counted" for p in preds)
