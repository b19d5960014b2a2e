"""`ctxbench score`'s protocol options (--thinking, --max-thinking-tokens, --system-prompt, --gen-kwargs, --repeats) as
one checked `Generation`, refused in one line before anything is written."""

from __future__ import annotations

import math
from typing import Any, Optional

from ctxbench.harness.cli_common import _kv
from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.types import SAMPLING_KEYS, THINKING_MODES, Generation


def generation(*, thinking: str, max_thinking_tokens: Optional[int], system_prompt: Optional[str],
               gen_kwargs: Optional[str], repeats: int, backend: str) -> Generation:
    """The run's protocol from its options."""
    if thinking not in THINKING_MODES:
        raise ConfigError(f"--thinking: use on, off or auto, got {thinking!r}")
    if max_thinking_tokens is not None and (max_thinking_tokens < 1 or thinking == "off"):
        raise ConfigError("--max-thinking-tokens: " + ("must be at least 1" if max_thinking_tokens < 1 else
                                                        "a thinking budget needs --thinking on (or auto)"))
    if thinking != "off" and not registry.declared("backend", backend, "thinking", True):
        able = [n for n in registry.names("backend") if registry.declared("backend", n, "thinking", True)]
        raise ConfigError(f"--thinking: backend {backend} has no thinking budget or reasoning split; use --backend "
                          f"{', '.join(able)} (`ctxbench backends`), or --thinking off")
    if system_prompt is not None and not system_prompt.strip():
        raise ConfigError("--system-prompt: empty; give the text of the system turn, or drop the option")
    sampling = sampling_kwargs(gen_kwargs)
    if sampling and not registry.backend_traits(backend, field="--backend").samples:
        able = [n for n in registry.names("backend") if registry.backend_traits(n).samples]
        raise ConfigError(f"--gen-kwargs: backend {backend} decodes greedily only; sample with --backend "
                          f"{', '.join(able)} (`ctxbench backends`), or drop --gen-kwargs")
    if repeats < 1:
        raise ConfigError("--repeats: must be at least 1")
    if repeats > 1 and not sampling:
        raise ConfigError(f"--repeats {repeats}: greedy decoding gives the same answer every time; sample with "
                          "--gen-kwargs temperature=0.7 (and a seed), or drop --repeats")
    return Generation(thinking=thinking, max_thinking_tokens=max_thinking_tokens or 0, system_prompt=system_prompt,
                      gen_kwargs=sampling, repeats=repeats)


SEED_MAX = 2**32 - 1  # numpy's and vLLM's seed range; torch's is wider


def sampling_kwargs(spec: Optional[str]) -> tuple[tuple[str, Any], ...]:
    """lm-eval's `--gen_kwargs K=V,...` as sorted (key, value) pairs; () is greedy (temperature 0, or do_sample=false
    without a temperature). Keys: temperature, top_p, top_k, seed, do_sample.

    Every value is checked here, never by the engine (a NaN temperature or a 1e23 seed was a traceback on hf): numbers
    finite, top_k and seed integers, do_sample a boolean. A sampling-only key (top_p, top_k, seed) without sampling is
    refused, not silently greedy: sampling is asked for with temperature > 0 or do_sample=true."""
    given = _kv([x for x in (spec or "").split(",") if x.strip()], "--gen-kwargs")
    valid = (*SAMPLING_KEYS, "do_sample")
    for key in given:
        if key not in valid:
            raise ConfigError(f"--gen-kwargs: {key}: unknown; valid keys: {', '.join(valid)} (each task sets its own "
                              "max new tokens: the suite's max_new_tokens or the task arg tokens_to_generate)")
    sample = _boolean(given.pop("do_sample")) if "do_sample" in given else None
    if sample and "temperature" not in given:
        given["temperature"] = 1.0
    out = {"temperature": _number(given, "temperature", 0.0), "top_p": _number(given, "top_p", 1.0),
           "top_k": _integer(given, "top_k", 0, 2**31 - 1), **({"seed": _integer(given, "seed", 0, SEED_MAX)}
                                                               if "seed" in given else {})}
    if out["temperature"] < 0 or not 0 < out["top_p"] <= 1:
        raise ConfigError("--gen-kwargs: need temperature >= 0 and 0 < top_p <= 1")
    greedy = out["temperature"] == 0 or sample is False
    if greedy and sample and out["temperature"] == 0:
        raise ConfigError("--gen-kwargs: do_sample=true with temperature=0 asks for both; give temperature > 0 to sample, "
                          "or drop do_sample")
    if greedy:
        asks = [f"{k}={given[k]}" for k in ("top_p", "top_k", "seed") if k in given and out[k] != {"top_p": 1.0, "top_k": 0}.get(k)]
        if asks:
            raise ConfigError(f"--gen-kwargs: {', '.join(asks)}: used only when sampling, and without temperature > 0 this "
                              "decodes greedily; add temperature=0.7 (any value > 0) to sample, or drop them")
        return ()  # greedy: the other settings do not apply
    kept = {k: v for k, v in out.items() if k in given or k == "temperature"}
    return tuple(sorted(kept.items()))


def _boolean(value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0"):
        raise ConfigError(f"--gen-kwargs: do_sample={value}: not a boolean; use do_sample=true or do_sample=false")
    return text in ("true", "1")


def _number(given: dict, key: str, default: float) -> float:
    """A finite number (NaN and inf both stored as null would give two run ids to one protocol)."""
    raw = given.get(key, default)
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ConfigError(f"--gen-kwargs: {key}={raw}: not a finite number; give e.g. {key}="
                          f"{'0.7' if key == 'temperature' else '0.9'}")
    return value


def _integer(given: dict, key: str, default: int, most: int) -> int:
    raw = given.get(key, default)
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= most:
        raise ConfigError(f"--gen-kwargs: {key}={raw}: need an integer from 0 to {most}")
    return raw
