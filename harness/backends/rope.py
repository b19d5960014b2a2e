"""RoPE scaling specs: `TYPE:FACTOR[,key=value...]` -> transformers `rope_parameters` and vLLM `hf_overrides`.

transformers 5.x keeps RoPE settings in `config.rope_parameters` (`rope_scaling` is a deprecated alias) with
`rope_type` and `rope_theta` inside. The keys each type needs (transformers 5.23, modeling_rope_utils):

    linear   rope_type, factor                                   (+ rope_theta)
    dynamic  rope_type, factor                                   (+ rope_theta)
    yarn     rope_type, factor, original_max_position_embeddings (+ rope_theta, attention_factor, beta_fast,
                                                                    beta_slow, mscale, mscale_all_dim, truncate)
    llama3   rope_type, factor, original_max_position_embeddings, low_freq_factor, high_freq_factor, rope_theta

`original_max_position_embeddings` defaults to the model's own trained context (its config's
max_position_embeddings, or an original_max_position_embeddings it already declares). The scaled context is
original x factor. vLLM takes the same dict as `hf_overrides={"rope_parameters": {...}}` together with
`max_model_len` (vLLM docs, "Context Extension"; `--rope-scaling` is gone from vLLM).
"""

from __future__ import annotations

import json
from typing import Any

from ctxbench.harness.core.errors import ConfigError

ROPE_TYPES = ("linear", "dynamic", "yarn", "llama3")
_EXTRA_KEYS: dict[str, dict[str, type]] = {
    "linear": {},
    "dynamic": {},
    "yarn": {"original_max_position_embeddings": int, "attention_factor": float, "beta_fast": float, "beta_slow": float,
             "mscale": float, "mscale_all_dim": float, "truncate": bool},
    "llama3": {"original_max_position_embeddings": int, "low_freq_factor": float, "high_freq_factor": float},
}
_COMMON_KEYS: dict[str, type] = {"rope_theta": float}
LLAMA3_DEFAULTS = {"low_freq_factor": 1.0, "high_freq_factor": 4.0}  # Llama 3.1's published values

_FIELD = "rope_scaling"
_HINT = "use TYPE:FACTOR, e.g. yarn:4 or linear:2 (types: " + ", ".join(ROPE_TYPES) + ")"


def _convert(key: str, value: Any, typ: type, field: str) -> Any:
    try:
        if typ is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes"):
                return True
            if str(value).lower() in ("0", "false", "no"):
                return False
            raise ValueError
        return typ(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{field}: {key}={value!r} is not a valid {typ.__name__}") from None


def parse_rope_scaling(spec: str | dict | None, *, field: str = _FIELD) -> dict[str, Any] | None:
    """`yarn:4`, `linear:2.5`, `yarn:4,original_max_position_embeddings=32768`, or a dict -> normalised dict.

    The dict has rope_type and factor plus any extra keys given; keys that need the model's config
    (rope_theta, original_max_position_embeddings) are filled in by `rope_parameters_for`.
    """
    if spec is None or spec == "" or spec == {}:
        return None
    if isinstance(spec, str) and spec.strip().startswith("{"):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError:
            raise ConfigError(f"{field}: {spec!r} is not valid JSON; {_HINT}") from None
    if isinstance(spec, dict):
        d = dict(spec)
        rtype = d.pop("rope_type", None) or d.pop("type", None)
        factor = d.pop("factor", None)
        extras = d
    elif isinstance(spec, str):
        head, *rest = [p.strip() for p in spec.split(",")]
        if ":" not in head:
            raise ConfigError(f"{field}: {spec!r} has no factor; {_HINT}")
        rtype, factor = (x.strip() for x in head.split(":", 1))
        extras = {}
        for item in rest:
            if "=" not in item:
                raise ConfigError(f"{field}: expected key=value after the factor, got {item!r}; {_HINT}")
            k, v = item.split("=", 1)
            extras[k.strip()] = v.strip()
    else:
        raise ConfigError(f"{field}: expected a TYPE:FACTOR string or a mapping, got {type(spec).__name__}; {_HINT}")
    rtype = str(rtype or "").lower()
    if rtype not in ROPE_TYPES:
        raise ConfigError(f"{field}: unknown RoPE type {rtype!r}; {_HINT}")
    factor = _convert("factor", factor, float, field)
    if not factor >= 1.0:
        raise ConfigError(f"{field}: factor must be >= 1 (it multiplies the context), got {factor}")
    allowed = {**_EXTRA_KEYS[rtype], **_COMMON_KEYS}
    out: dict[str, Any] = {"rope_type": rtype, "factor": factor}
    for k, v in extras.items():
        if k not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise ConfigError(f"{field}: {k!r} does not apply to {rtype} scaling; allowed extra keys: {known}")
        out[k] = _convert(k, v, allowed[k], field)
    return out


def _base_params(config: Any) -> tuple[dict[str, Any], int]:
    """(current rope_parameters, max_position_embeddings) from a transformers config or a config.json dict."""
    get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
    base = dict(get("rope_parameters", None) or get("rope_scaling", None) or {})
    if "rope_theta" not in base and get("rope_theta", None) is not None:
        base["rope_theta"] = get("rope_theta")
    max_pos = get("max_position_embeddings", None)
    if not max_pos:
        raise ConfigError(f"{_FIELD}: the model config has no max_position_embeddings; RoPE scaling needs its trained context")
    return base, int(max_pos)


def rope_parameters_for(config: Any, rope: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The full `rope_parameters` dict for this model, and the scaled context length (original x factor).

    Keeps the model's rope_theta (and partial_rotary_factor); replaces any scaling it already had.
    """
    base, max_pos = _base_params(config)
    orig = int(rope.get("original_max_position_embeddings") or base.get("original_max_position_embeddings") or max_pos)
    params: dict[str, Any] = {k: base[k] for k in ("rope_theta", "partial_rotary_factor") if k in base}
    params.setdefault("rope_theta", 10000.0)
    params.update(rope)
    if rope["rope_type"] in ("yarn", "llama3"):
        params["original_max_position_embeddings"] = orig
    if rope["rope_type"] == "llama3":
        for k, v in LLAMA3_DEFAULTS.items():
            params.setdefault(k, v)
    return params, int(orig * rope["factor"])


def apply_to_hf_config(config: Any, spec: str | dict | None) -> int | None:
    """Set RoPE scaling on a loaded transformers config in place; return the scaled context length.

    linear, yarn and llama3 also raise config.max_position_embeddings to the scaled context (yarn and llama3
    read the original length from rope_parameters). dynamic keeps it: HF's dynamic NTK uses
    max_position_embeddings as the length beyond which it rescales.
    """
    rope = parse_rope_scaling(spec)
    if rope is None:
        return None
    params, scaled = rope_parameters_for(config, rope)
    config.rope_parameters = params
    if rope["rope_type"] != "dynamic":
        config.max_position_embeddings = scaled
    if hasattr(config, "standardize_rope_params"):
        config.standardize_rope_params()
    if hasattr(config, "validate_rope"):
        config.validate_rope()
    return scaled


def vllm_hf_overrides(config: Any, spec: str | dict | None) -> tuple[dict[str, Any], int | None]:
    """(hf_overrides, max_model_len) for vllm.LLM from a spec and the model's config (object or config.json dict)."""
    rope = parse_rope_scaling(spec)
    if rope is None:
        return {}, None
    params, scaled = rope_parameters_for(config, rope)
    return {"rope_parameters": params}, scaled
