"""lm-eval models as ctxbench backends: names, the argument mapping, and the generate_until call."""

from pathlib import Path

import pytest

from ctxbench.harness.backends.lmeval_model import lm_arguments, split_backend_name
from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.types import Request

lm_eval = pytest.importorskip("lm_eval")


def test_names_and_split():
    assert "lmeval" in registry.names("backend")  # one entry: lmeval:<type> is it with model_type=<type>, any type
    for t in ("hf", "vllm", "sglang", "local-completions", "local-chat-completions", "hf-multimodal"):
        assert registry.get("backend", f"lmeval:{t}").keywords == {"model_type": t}
        assert registry.backend_traits(f"lmeval:{t}").name == "lmeval"
    assert split_backend_name("lmeval:hf-multimodal") == ("lmeval", {"model_type": "hf-multimodal"})
    assert split_backend_name("openai") == ("openai", {})


def test_argument_mapping():
    s, extra = lm_arguments("vllm", "smollm2-135m", "/models/smol", None, 4096, {"gpu_memory_utilization": 0.5})
    assert s == "pretrained=/models/smol" and extra == {"gpu_memory_utilization": 0.5, "max_model_len": 4096}
    s, extra = lm_arguments("local-completions", "my-model", None, "/tok", 0, {"base_url": "http://h/v1/completions"})
    assert s == "model=my-model"
    assert extra == {"base_url": "http://h/v1/completions", "tokenizer": "/tok", "tokenizer_backend": "huggingface"}
    s, extra = lm_arguments("hf", "m", "/a,b", None, 0, {"device": "cpu"})
    assert s == "" and extra == {"device": "cpu", "pretrained": "/a,b"}  # a comma cannot go in an arg string


def test_generate_until_gets_rendered_prompts_and_greedy_kwargs(monkeypatch, smol_tokenizer):
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    seen = {}

    class FakeLM(LM):
        def __init__(self, pretrained=None, max_length=2048, **kw):
            super().__init__()
            seen["init"] = {"pretrained": pretrained, "max_length": max_length, **kw}
            self.max_length = max_length

        def generate_until(self, requests, disable_tqdm=False):
            seen["args"] = [r.args for r in requests]
            return [f" out{i}" for i in range(len(requests))]

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    try:
        register_model("ctxbench-test-fake")(FakeLM)
    except ValueError:
        pass  # registered by an earlier run in this process
    b = registry.get("backend", "lmeval")(model="smollm2-135m", model_type="ctxbench-test-fake", context_length=1000, batch_size=3)
    assert (Path(seen["init"]["pretrained"]) / "config.json").exists() and seen["init"]["max_length"] == 1000
    assert seen["init"]["batch_size"] == 3 and b.context_length == 1000
    reqs = [Request("a", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n Answer:", 7, False, None, "hi", " Answer:"),
            Request("b", "x " * 2000, 5, False)]
    with pytest.raises(Exception, match="--truncation middle"):
        b.generate(reqs)
    preds = b.generate(reqs[:1])
    assert seen["args"] == [(reqs[0].prompt, {"until": [], "max_gen_toks": 7, "do_sample": False, "temperature": 0.0})]
    assert preds[0].text == " out0" and preds[0].generated_tokens == 2 and preds[0].error is None
    info = b.info()
    assert info["lm_eval_model_type"] == "ctxbench-test-fake" and info["lm_eval_args"]["batch_size"] == 3


def test_bad_type_and_missing_type_are_config_errors():
    with pytest.raises(ConfigError, match="model_type"):
        registry.get("backend", "lmeval")(model="smollm2-135m")
    with pytest.raises(ConfigError, match="no model type"):
        registry.get("backend", "lmeval")(model="smollm2-135m", model_type="no-such-model-type")
