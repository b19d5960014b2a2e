"""RoPE scaling specs: parsing, the transformers 5.x rope_parameters they become, vLLM hf_overrides, HF backend."""

import json
from pathlib import Path

import pytest

from ctxbench.harness.backends.rope import apply_to_hf_config, parse_rope_scaling, rope_parameters_for, vllm_hf_overrides
from ctxbench.harness.core.errors import ConfigError


def test_parse_specs():
    assert parse_rope_scaling("yarn:4") == {"rope_type": "yarn", "factor": 4.0}
    assert parse_rope_scaling("Linear:2.5") == {"rope_type": "linear", "factor": 2.5}
    assert parse_rope_scaling("yarn:4,beta_fast=16,original_max_position_embeddings=4096") == {
        "rope_type": "yarn", "factor": 4.0, "beta_fast": 16.0, "original_max_position_embeddings": 4096}
    assert parse_rope_scaling({"type": "dynamic", "factor": 2}) == {"rope_type": "dynamic", "factor": 2.0}
    assert parse_rope_scaling('{"rope_type": "llama3", "factor": 8}') == {"rope_type": "llama3", "factor": 8.0}
    assert parse_rope_scaling(None) is None and parse_rope_scaling("") is None


@pytest.mark.parametrize("spec, msg", [
    ("yarn", "has no factor"), ("ntk:2", "unknown RoPE type"), ("linear:x", "not a valid float"),
    ("linear:0.5", "factor must be >= 1"), ("linear:2,beta_fast=3", "does not apply to linear"),
    ("yarn:2,beta_fast", "expected key=value"),
])
def test_bad_specs_are_one_line_config_errors(spec, msg):
    with pytest.raises(ConfigError, match=msg) as e:
        parse_rope_scaling(spec)
    assert "\n" not in str(e.value) and str(e.value).startswith("rope_scaling:")


def test_keys_per_type_for_transformers_5():
    config = {"max_position_embeddings": 8192, "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}}
    p, n = rope_parameters_for(config, parse_rope_scaling("linear:2"))
    assert p == {"rope_type": "linear", "factor": 2.0, "rope_theta": 100000.0} and n == 16384
    p, n = rope_parameters_for(config, parse_rope_scaling("dynamic:2"))
    assert p == {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 100000.0} and n == 16384
    p, n = rope_parameters_for(config, parse_rope_scaling("yarn:4"))
    assert p == {"rope_type": "yarn", "factor": 4.0, "rope_theta": 100000.0, "original_max_position_embeddings": 8192}
    assert n == 32768
    p, n = rope_parameters_for(config, parse_rope_scaling("llama3:8"))
    assert p == {"rope_type": "llama3", "factor": 8.0, "rope_theta": 100000.0, "original_max_position_embeddings": 8192,
                 "low_freq_factor": 1.0, "high_freq_factor": 4.0} and n == 65536
    legacy = {"max_position_embeddings": 4096, "rope_theta": 500000.0}  # transformers 4.x style config.json
    assert rope_parameters_for(legacy, parse_rope_scaling("linear:2"))[0]["rope_theta"] == 500000.0


def test_vllm_overrides_carry_the_full_rope_parameters():
    config = {"max_position_embeddings": 32768, "rope_theta": 1000000.0}
    overrides, max_len = vllm_hf_overrides(config, "yarn:4")
    assert overrides == {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1000000.0,
                                             "original_max_position_embeddings": 32768}}
    assert max_len == 131072
    assert vllm_hf_overrides(config, None) == ({}, None)


@pytest.mark.parametrize("spec", ["linear:2", "dynamic:2", "yarn:4", "llama3:8"])
def test_transformers_config_accepts_every_type(smol_dir, spec):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(smol_dir)
    n = apply_to_hf_config(config, spec)
    assert config.rope_parameters["rope_type"] == spec.split(":")[0] and n == 8192 * int(spec.split(":")[1])
    assert config.max_position_embeddings == (8192 if spec.startswith("dynamic") else n)
    config.validate_rope()


def test_hf_backend_loads_the_model_with_rope_scaling(smol_dir):
    from ctxbench.harness.backends.hf import HFBackend

    b = HFBackend(model="smollm2-135m", rope_scaling="yarn:2", dtype="float32", threads=1)
    assert b.context_length == 16384
    cfg = b.model.config
    assert cfg.rope_parameters["rope_type"] == "yarn" and cfg.rope_parameters["factor"] == 2.0
    assert cfg.rope_parameters["original_max_position_embeddings"] == 8192
    assert b.model.model.rotary_emb.rope_type == "yarn"  # the loaded model really uses it
    assert json.loads((Path(smol_dir) / "config.json").read_text())["rope_parameters"]["rope_type"] == "default"  # on disk: untouched
