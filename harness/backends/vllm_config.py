"""What the vLLM backend needs before an engine starts: vllm.LLM's keyword arguments, the model's config and its stop
ids. Pure functions, unit-testable without vllm (harness/backends/vllm_engine.py runs the engines)."""

from __future__ import annotations

import json
import os
from typing import Any

from ctxbench.harness.core.errors import ConfigError, OfflineError


def model_config(path: str, model: str) -> dict[str, Any]:
    """The model's config.json (or transformers' reading of it, for a hub id in the cache)."""
    try:
        with open(os.path.join(path, "config.json")) as f:
            return json.load(f)
    except OSError:
        try:
            from transformers import AutoConfig

            return AutoConfig.from_pretrained(path).to_dict()
        except OSError as e:
            raise OfflineError(f"model: cannot load the config of {model!r}: {str(e).splitlines()[0]}") from None


def stop_ids(path: str, config: dict[str, Any], tokenizer) -> list[int]:
    """The EOS ids generation stops at, as HF takes them: generation_config, else config, plus the tokenizer's eos/pad."""
    eos = config.get("eos_token_id")
    gen_path = os.path.join(path, "generation_config.json")
    if os.path.exists(gen_path):
        with open(gen_path) as f:
            eos = json.load(f).get("eos_token_id", eos)
    ids = set(eos if isinstance(eos, list) else [eos]) | {tokenizer.eos_token_id, tokenizer.pad_token_id}
    return sorted(i for i in ids if isinstance(i, int))


def flag(value: Any, field: str) -> bool:
    """A backend arg that may arrive as a string from --backend-arg: true/false, yes/no, on/off, 1/0."""
    if isinstance(value, bool):
        return value
    s = str(value).lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"backend_args.{field}: expected true or false, got {value!r}")


def json_object(value: Any, field: str) -> dict:
    """A backend arg that may arrive as JSON text from --backend-arg: always a dict."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, dict):
        raise ConfigError(f"backend_args.{field}: expected a JSON object, e.g. {field}='{{\"key\": 1}}'")
    return value


def build_engine_kwargs(
    path: str,
    *,
    config: dict[str, Any],
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    max_model_len: int = 0,
    gpu_memory_utilization: float = 0.9,
    enable_prefix_caching: bool = True,
    enable_chunked_prefill: bool = True,
    rope_scaling: str | dict | None = None,
    hf_overrides: dict | None = None,
    dtype: str = "auto",
    max_num_seqs: int = 0,
    max_num_batched_tokens: int = 0,
    enforce_eager: bool = False,
    seed: int = 0,
    kv_cache_dtype: str = "auto",
    engine_args: dict | None = None,
) -> dict[str, Any]:
    """Keyword arguments for vllm.LLM. Pure: unit-testable without vllm. config: the model's config.json."""
    from ctxbench.harness.backends.rope import vllm_hf_overrides

    overrides, rope_len = vllm_hf_overrides(config, rope_scaling)
    overrides.update(hf_overrides or {})
    kw: dict[str, Any] = {
        "model": path,
        "tokenizer": path,
        "tensor_parallel_size": int(tensor_parallel_size),
        "pipeline_parallel_size": int(pipeline_parallel_size),
        "gpu_memory_utilization": float(gpu_memory_utilization),
        "enable_prefix_caching": bool(enable_prefix_caching),
        "enable_chunked_prefill": bool(enable_chunked_prefill),
        "dtype": dtype,
        "seed": int(seed),
        "kv_cache_dtype": kv_cache_dtype,
        "enforce_eager": bool(enforce_eager),
    }
    if max_model_len or rope_len:
        kw["max_model_len"] = int(max_model_len or rope_len)
    if overrides:
        kw["hf_overrides"] = overrides
    if max_num_seqs:
        kw["max_num_seqs"] = int(max_num_seqs)
    if max_num_batched_tokens:
        kw["max_num_batched_tokens"] = int(max_num_batched_tokens)
    for k, v in (engine_args or {}).items():
        kw[k] = v
    if not 0 < kw["gpu_memory_utilization"] <= 1:
        raise ConfigError("backend_args.gpu_memory_utilization: must be in (0, 1], e.g. 0.9")
    if kw["tensor_parallel_size"] < 1 or kw["pipeline_parallel_size"] < 1:
        raise ConfigError("backend_args.tensor_parallel_size/pipeline_parallel_size: must be >= 1")
    return kw
