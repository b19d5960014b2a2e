"""Each backend's argument model matches what the backend takes, and bad arguments are refused before it is built."""

from __future__ import annotations

import inspect

import pytest

from ctxbench.harness.backends.args import EchoArgs, HFArgs, VLLMArgs
from ctxbench.harness.backends.echo import EchoBackend
from ctxbench.harness.backends.hf import HFBackend
from ctxbench.harness.backends.vllm_engine import VLLMBackend
from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError


@pytest.mark.parametrize("model, backend", [(EchoArgs, EchoBackend), (HFArgs, HFBackend), (VLLMArgs, VLLMBackend)])
def test_the_model_declares_every_constructor_argument(model, backend):
    """A new constructor argument must be declared (with a description), or users could never pass it."""
    params = {name: p.default for name, p in inspect.signature(backend.__init__).parameters.items()
              if name not in ("self", "model", "truncation")}
    assert set(model.model_fields) == set(params)
    for name, field in model.model_fields.items():
        assert field.default == params[name], name
        assert field.description, f"{model.__name__}.{name} needs a description"


@pytest.mark.parametrize("name, args, message", [
    ("hf", {"dtyp": "float32"}, r"backend_args\.dtyp: unknown key for backend hf; valid keys: attn_implementation"),
    ("hf", {"batch_size": "four"}, r"backend_args\.batch_size: .*integer"),
    ("hf", {"threads": -1}, r"backend_args\.threads: .*greater than or equal to 0"),
    ("vllm", {"tensor_parallel": 8}, r"backend_args\.tensor_parallel: unknown key for backend vllm"),
    ("vllm", {"gpu_memory_utilization": 3}, r"backend_args\.gpu_memory_utilization"),
    ("echo", {"delay": "soon"}, r"backend_args\.delay: .*number"),
    ("lmeval:hf", {"chunk_size": 0}, r"backend_args\.chunk_size"),
])
def test_bad_arguments_are_refused_before_anything_loads(name, args, message, monkeypatch):
    import ctxbench.harness.backends.hf as hf

    def never(*a, **k):  # the check comes first: no model, no engine, no tokenizer is loaded
        raise AssertionError("the backend was built")

    monkeypatch.setattr(hf, "HFBackend", never)
    with pytest.raises(ConfigError, match=message):
        registry.get("backend", name)(model="smollm2-135m", **args)
