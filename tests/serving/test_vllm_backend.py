"""The vLLM backend's engine arguments and requests, with a fake `vllm` module (runs without a GPU),
and one end-to-end run on a real GPU (`-m gpu`)."""

import json
import sys
import threading
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from ctxbench.harness.core.errors import ConfigError, PromptTooLongError
from ctxbench.harness.core.types import Request

EOS = 2  # <|im_end|> in SmolLM2


class FakeLLM:
    """Records what it is given; 'generates' the last three prompt tokens, then EOS."""

    instances: list = []

    def __init__(self, **kw):
        self.kw = kw
        self.calls = []
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=kw.get("max_model_len", 8192)))
        FakeLLM.instances.append(self)

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append((prompts, params))
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=(list(p["prompt_token_ids"][-3:]) + [EOS])[: sp.max_tokens],
                                                         finish_reason="stop")], num_cached_tokens=5,
                                prompt_logprobs=fake_prompt_logprobs(p["prompt_token_ids"]) if getattr(sp, "prompt_logprobs", None)
                                else None)
                for p, sp in zip(prompts, params)]


def fake_logprob(previous: int, token: int) -> float:
    return -((previous * 7 + token) % 11) / 3 - 0.1


def fake_prompt_logprobs(ids):
    """vLLM's shape: None for the first token, then {token id: Logprob} holding the prompt token and a top-1 other."""
    return [None] + [{t: SimpleNamespace(logprob=fake_logprob(p, t), rank=2), t + 1: SimpleNamespace(logprob=-0.01, rank=1)}
                     for p, t in zip(ids, ids[1:])]


class FakeSamplingParams:
    def __init__(self, **kw):
        self.__dict__.update(kw)


@pytest.fixture()
def fake_vllm(monkeypatch):
    FakeLLM.instances = []
    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams, mod.__version__ = FakeLLM, FakeSamplingParams, "0.33.0+fake"
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda **kw: dict(kw)
    mod.inputs = inputs
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    return mod


def chat_request(tok, sid, user, max_new=16, prefix=" Answer:"):
    prompt = tok.apply_chat_template([{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True) + prefix
    return Request(sid, prompt, max_new, False, None, user, prefix)


def test_engine_arguments(smol_dir):
    from ctxbench.harness.backends.vllm_engine import build_engine_kwargs

    config = json.loads((Path(smol_dir) / "config.json").read_text())
    kw = build_engine_kwargs(smol_dir, config=config)
    assert kw["model"] == smol_dir and kw["tensor_parallel_size"] == 1 and kw["pipeline_parallel_size"] == 1
    assert kw["enable_prefix_caching"] is True and kw["enable_chunked_prefill"] is True
    assert kw["gpu_memory_utilization"] == 0.9 and "max_model_len" not in kw and "hf_overrides" not in kw
    kw = build_engine_kwargs(smol_dir, config=config, tensor_parallel_size=4, pipeline_parallel_size=2, max_model_len=4096,
                             gpu_memory_utilization=0.8, enable_prefix_caching=False, engine_args={"kv_cache_dtype": "fp8"})
    assert (kw["tensor_parallel_size"], kw["pipeline_parallel_size"], kw["max_model_len"]) == (4, 2, 4096)
    assert kw["gpu_memory_utilization"] == 0.8 and kw["enable_prefix_caching"] is False and kw["kv_cache_dtype"] == "fp8"
    kw = build_engine_kwargs(smol_dir, config=config, rope_scaling="yarn:4")
    assert kw["hf_overrides"] == {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 100000.0,
                                                      "original_max_position_embeddings": 8192}}
    assert kw["max_model_len"] == 32768
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        build_engine_kwargs(smol_dir, config=config, gpu_memory_utilization=1.5)


def test_missing_vllm_says_how_to_install(monkeypatch):
    from ctxbench.harness.backends.vllm_engine import VLLMBackend

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(ConfigError, match=r"pip install 'ctxbench\[vllm\]'"):
        VLLMBackend(model="smollm2-135m")


def test_requests_are_exact_token_ids_in_prefix_order(fake_vllm, smol_tokenizer):
    from ctxbench.harness.core import registry

    b = registry.get("backend", "vllm")(model="smollm2-135m", tensor_parallel_size=1, hf_overrides='{"sliding_window": null}')
    (llm,) = FakeLLM.instances
    assert llm.kw["hf_overrides"] == {"sliding_window": None} and b.context_length == 8192
    shared = "A long shared document. " * 20
    reqs = [chat_request(smol_tokenizer, f"t@1#{i}", shared + q, max_new=4 + i)
            for i, q in enumerate(["Question B?", "Question A?", "Another document entirely. Question?"])]
    reqs.append(Request("plain", "Plain template prompt", 3, True))  # base-model prompt: the tokenizer adds specials
    preds = b.generate(reqs)

    (prompts, params), = llm.calls
    expected = [smol_tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"] for r in reqs]
    sent = [p["prompt_token_ids"] for p in prompts]
    assert sorted(map(tuple, sent)) == sorted(map(tuple, expected)) and sent == sorted(sent)  # exact ids, prefix order
    by_ids = {tuple(p["prompt_token_ids"]): sp for p, sp in zip(prompts, params)}
    for r, ids in zip(reqs, expected):
        sp = by_ids[tuple(ids)]
        assert sp.temperature == 0.0 and sp.max_tokens == r.max_new_tokens and EOS in sp.stop_token_ids
    for r, ids, p in zip(reqs, expected, preds):  # each prediction comes back to its own request
        assert p.sample_id == r.sample_id and p.prompt_tokens == len(ids)
        n = min(3, r.max_new_tokens)
        assert p.text == smol_tokenizer.decode(ids[-3:][:n], skip_special_tokens=True) and p.generated_tokens == n
    assert b.last_cached_tokens == 5 * len(reqs)
    info = b.info()
    json.dumps(info)
    assert info["enable_prefix_caching"] is True and info["decoding"] == "greedy" and info["vllm"] == "0.33.0+fake"


def test_truncation_policy(fake_vllm, smol_tokenizer):
    from ctxbench.harness.backends.vllm_engine import VLLMBackend

    long = chat_request(smol_tokenizer, "long", "word " * 300)
    with pytest.raises(PromptTooLongError, match="--truncation middle"):
        VLLMBackend(model="smollm2-135m", max_model_len=200).generate([long])
    (p,) = VLLMBackend(model="smollm2-135m", max_model_len=200, truncation="middle").generate([long])
    assert p.truncated_tokens > 0 and p.prompt_tokens == 200 - long.max_new_tokens


class ThreadProcess(threading.Thread):
    """Stands in for a spawned process, so the fake vllm module is visible to the worker."""

    started: list = []

    def __init__(self, target, args, daemon):
        super().__init__(target=target, args=args, daemon=daemon)
        ThreadProcess.started.append(args[2])

    def terminate(self):
        pass


def test_data_parallel_engines_split_the_ordered_requests(fake_vllm, smol_tokenizer, monkeypatch):
    import multiprocessing

    from ctxbench.harness.backends.vllm_engine import VLLMBackend

    ThreadProcess.started = []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(multiprocessing, "get_context",
                        lambda method: SimpleNamespace(Pipe=multiprocessing.Pipe, Process=ThreadProcess))
    b = VLLMBackend(model="smollm2-135m", data_parallel_size=2, tensor_parallel_size=2)
    try:
        assert ThreadProcess.started == ["0,1", "2,3"] and len(FakeLLM.instances) == 2
        reqs = [chat_request(smol_tokenizer, f"s{i}", f"Document {i % 2}. " * 30 + f"Question {i}?") for i in range(6)]
        preds = b.generate(reqs)
        assert [p.sample_id for p in preds] == [r.sample_id for r in reqs] and all(p.generated_tokens == 3 for p in preds)
        assert all(len(llm.calls) == 1 for llm in FakeLLM.instances)  # both engines got a contiguous run
        with pytest.raises(ConfigError, match="need 8 GPUs"):
            VLLMBackend(model="smollm2-135m", data_parallel_size=4, tensor_parallel_size=2)
    finally:
        b.close()


@pytest.mark.gpu
def test_vllm_end_to_end_on_gpu(smol_tokenizer, data_dir):
    pytest.importorskip("vllm")
    from ctxbench.harness.backends.vllm_engine import VLLMBackend
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    task = build_task(TaskSpec(task="ruler/niah_single_1"))
    samples = datasets.generate(task, length=1024, indices=range(4), seed=42,
                                ctx=GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir))
    b = VLLMBackend(model="smollm2-135m", max_model_len=4096, gpu_memory_utilization=0.3, dtype="bfloat16")
    reqs = [Request(s.id, s.prompt, s.max_new_tokens, s.add_special_tokens, s.prompt_tokens, s.user_text, s.answer_prefix)
            for s in samples]
    preds = b.generate(reqs)
    assert all(p.error is None and p.generated_tokens > 0 for p in preds)
    assert [p.prompt_tokens for p in preds] == [s.prompt_tokens for s in samples]
    assert sum(any(a in p.text for a in s.answers) for s, p in zip(samples, preds)) >= 2, [p.text for p in preds]
    b.generate(reqs)  # the same prompts again: the prefix cache serves them
    assert b.last_cached_tokens > 0


def test_token_logprobs_come_from_prompt_logprobs(fake_vllm):
    from ctxbench.harness.backends.vllm_engine import VLLMBackend
    from ctxbench.harness.core.types import LogprobRequest

    b = VLLMBackend(model="smollm2-135m", max_model_len=64)
    assert "prompt_logprobs" in b.capabilities
    reqs = [LogprobRequest("d@32#0/w0", tuple(range(100, 132)), 1), LogprobRequest("d@32#0/w1", tuple(range(140, 172)), 16)]
    out = b.token_logprobs(reqs)
    (llm,) = FakeLLM.instances
    (prompts, params), = llm.calls
    assert [p["prompt_token_ids"] for p in prompts] == [list(r.token_ids) for r in reqs]  # exact ids, in order
    assert all(sp.prompt_logprobs == 1 and sp.max_tokens == 1 and sp.temperature == 0.0 for sp in params)
    for r, res in zip(reqs, out):
        ids = r.token_ids
        assert res.sample_id == r.sample_id and res.error is None
        assert res.logprobs == pytest.approx([fake_logprob(ids[i - 1], ids[i]) for i in range(r.score_from, len(ids))])
    with pytest.raises(PromptTooLongError, match="exceeds the model's context of 64"):
        b.token_logprobs([LogprobRequest("long", tuple(range(65)), 1)])
    with pytest.raises(ValueError, match="score_from"):
        b.token_logprobs([LogprobRequest("bad", (1, 2, 3), 3)])


def test_token_logprobs_refuse_data_parallel_engines(fake_vllm, monkeypatch):
    from ctxbench.harness.backends.vllm_engine import VLLMBackend
    from ctxbench.harness.core.types import LogprobRequest

    b = VLLMBackend.__new__(VLLMBackend)  # the refusal comes before any engine is touched
    b.dp = 2
    with pytest.raises(ConfigError, match="data_parallel_size: prompt log-probabilities run on one engine"):
        b.token_logprobs([LogprobRequest("x", (1, 2, 3), 1)])


def test_sampling_and_thinking_reach_the_engine(fake_vllm, smol_tokenizer):
    """--gen-kwargs becomes the request's SamplingParams (each repeat its own seed); thinking raises max_tokens by the
    thinking budget (issue 25)."""
    import dataclasses

    from ctxbench.harness.core import registry

    b = registry.get("backend", "vllm")(model="smollm2-135m")
    (llm,) = FakeLLM.instances
    base = chat_request(smol_tokenizer, "t@1#0", "Question?", max_new=4)
    sampled = dataclasses.replace(base, sampling=(("seed", 3), ("temperature", 0.6), ("top_p", 0.9)))
    b.generate([sampled, dataclasses.replace(sampled, sample_id="t@1#0~1", repeat=1),
                dataclasses.replace(base, sample_id="t@1#1", thinking=True, max_thinking_tokens=50)])
    (_, params), = llm.calls
    got = sorted((getattr(p, "seed", -1), p.temperature, getattr(p, "top_p", None), p.max_tokens) for p in params)
    assert got == [(-1, 0.0, None, 54), (3, 0.6, 0.9, 4), (4, 0.6, 0.9, 4)]
