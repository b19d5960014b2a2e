"""`ctxbench score`'s protocol options (--thinking, --max-thinking-tokens, --system-prompt, --gen-kwargs, --repeats) as
one checked `Generation`, refused in one line before anything is written."""

from __future__ import annotations

from typing import Any, Optional

from ctxbench.harness.cli_common import _kv
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.types import SAMPLING_KEYS, THINKING_MODES, Generation

SAMPLING_BACKENDS = ("hf", "vllm", "openai", "echo")  # the backends that decode with a run's --gen-kwargs


def generation(*, thinking: str, max_thinking_tokens: Optional[int], system_prompt: Optional[str],
               gen_kwargs: Optional[str], repeats: int, backend: str) -> Generation:
    """The run's protocol from its options."""
    if thinking not in THINKING_MODES:
        raise ConfigError(f"--thinking: use on, off or auto, got {thinking!r}")
    if max_thinking_tokens is not None and (max_thinking_tokens < 1 or thinking == "off"):
        raise ConfigError("--max-thinking-tokens: " + ("must be at least 1" if max_thinking_tokens < 1 else
                                                        "a thinking budget needs --thinking on (or auto)"))
    if thinking != "off" and backend.startswith("lmeval"):
        raise ConfigError(f"--thinking: backend {backend} (lm-eval's model) has no thinking budget or reasoning split; "
                          "use --backend hf, vllm or openai")
    if system_prompt is not None and not system_prompt.strip():
        raise ConfigError("--system-prompt: empty; give the text of the system turn, or drop the option")
    sampling = sampling_kwargs(gen_kwargs)
    if sampling and backend.split(":", 1)[0] not in SAMPLING_BACKENDS:
        raise ConfigError(f"--gen-kwargs: backend {backend} decodes greedily only; sample with --backend hf, vllm or openai, "
                          "or drop --gen-kwargs")
    if repeats < 1:
        raise ConfigError("--repeats: must be at least 1")
    if repeats > 1 and not sampling:
        raise ConfigError(f"--repeats {repeats}: greedy decoding gives the same answer every time; sample with "
                          "--gen-kwargs temperature=0.7 (and a seed), or drop --repeats")
    return Generation(thinking=thinking, max_thinking_tokens=max_thinking_tokens or 0, system_prompt=system_prompt,
                      gen_kwargs=sampling, repeats=repeats)


def sampling_kwargs(spec: Optional[str]) -> tuple[tuple[str, Any], ...]:
    """lm-eval's `--gen_kwargs K=V,...` as sorted (key, value) pairs; () is greedy (temperature 0, or do_sample=false
    without a temperature). Keys: temperature, top_p, top_k, seed, do_sample."""
    given = _kv([x for x in (spec or "").split(",") if x.strip()], "--gen-kwargs")
    valid = (*SAMPLING_KEYS, "do_sample")
    for key in given:
        if key not in valid:
            raise ConfigError(f"--gen-kwargs: {key}: unknown; valid keys: {', '.join(valid)} (each task sets its own "
                              "max new tokens: the suite's max_new_tokens or the task arg tokens_to_generate)")
    sample = str(given.pop("do_sample", "")).lower()
    if sample == "true" and "temperature" not in given:
        given["temperature"] = 1.0
    try:
        out = {"temperature": float(given.get("temperature", 0)), "top_p": float(given.get("top_p", 1)),
               "top_k": int(given.get("top_k", 0)), **({"seed": int(given["seed"])} if "seed" in given else {})}
    except (TypeError, ValueError):
        raise ConfigError("--gen-kwargs: temperature and top_p are numbers, top_k and seed integers") from None
    if out["temperature"] < 0 or not 0 < out["top_p"] <= 1 or out["top_k"] < 0:
        raise ConfigError("--gen-kwargs: need temperature >= 0, 0 < top_p <= 1 and top_k >= 0")
    if out["temperature"] == 0 or sample == "false":
        return ()  # greedy: the other settings do not apply
    kept = {k: v for k, v in out.items() if k in given or k == "temperature"}
    return tuple(sorted(kept.items()))
