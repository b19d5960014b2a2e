"""Helpers shared by CLI command modules: consoles and parsers of CLI values."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from rich.console import Console

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.lengths import parse_length

err = Console(stderr=True, soft_wrap=True)  # messages stay one line however narrow the terminal
out = Console(soft_wrap=True)


def _ints(value: Optional[str], field: str) -> Optional[list[int]]:
    if not value:
        return None
    try:
        return [parse_length(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{field}: expected comma-separated lengths like 1024,2048 or 4k,8k, got {value!r}") from None


def _kv(items: list[str], field: str) -> dict:
    outd = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"{field}: expected KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            outd[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            outd[k.strip()] = v
    return outd


def writable_dir(path: Path, field: str) -> Path:
    """Refuse, before any work, an output directory that sits under a file (or is one)."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                what = "is" if p == path else f"is under {p}, which is"
                raise ConfigError(f"{field}: {path} {what} a file, not a directory; choose another path")
            if not os.access(p, os.W_OK | os.X_OK):
                raise ConfigError(f"{field}: {p} is not writable; choose another path")
            break
    return path


def _data_dir(value: Optional[Path]) -> Optional[Path]:
    value = value or (Path(os.environ["CTXBENCH_DATA_DIR"]) if os.environ.get("CTXBENCH_DATA_DIR") else None)
    if value is not None and not value.is_dir():
        raise ConfigError(f"--data-dir: {value} is not a directory")
    return value




# lm-evaluation-harness 0.4.13's spellings, with lm-eval's meanings (its --model is the model *type* when
# --model_args names the model with pretrained=; its max_length is the context length).
LMEVAL_MODEL_TYPES = {"hf": "hf", "huggingface": "hf", "hf-auto": "hf", "vllm": "vllm"}
LMEVAL_CONTEXT_ARG = {"hf": "max_context", "vllm": "max_model_len"}


@dataclass(frozen=True)
class ModelChoice:
    """The model, backend, extra backend arguments and store that ctxbench's and lm-eval's spellings resolve to."""

    model: str
    backend: str
    backend_args: dict
    store: Path


def lmeval_model(*, model: Optional[str], backend: Optional[str], store: Optional[Path], model_args: Optional[str],
                 output_path: Optional[Path], default_backend: str = "hf") -> ModelChoice:
    """`--model_args pretrained=X,k=v` (pretrained= is the model, the rest backend arguments; with it, `--model hf` is
    lm-eval's model type, i.e. the backend) and `--output_path DIR` (the store: run directories land under it)."""
    args = _kv([x for x in (model_args or "").split(",") if x.strip()], "--model_args")
    pretrained = args.pop("pretrained", None)
    if pretrained is not None and model is not None:
        kind = LMEVAL_MODEL_TYPES.get(model)
        if kind is None:
            raise ConfigError(f"--model_args: pretrained= names the model and so does --model {model}; give it once "
                              f"(beside pretrained=, --model is lm-eval's model type: {', '.join(LMEVAL_MODEL_TYPES)})")
        if backend not in (None, kind):
            raise ConfigError(f"--model {model}: lm-eval's model type (backend {kind}) disagrees with --backend {backend}; give one")
        backend = kind
    backend = backend or default_backend
    if "max_length" in args and backend in LMEVAL_CONTEXT_ARG:
        args[LMEVAL_CONTEXT_ARG[backend]] = args.pop("max_length")
    if output_path is not None:
        if store is not None and store != output_path:
            raise ConfigError(f"--output_path: lm-eval's spelling of --store, which says {store}; give one of them")
        if output_path.suffix in (".json", ".jsonl"):
            raise ConfigError(f"--output_path: {output_path} names a file; give a directory (each run is a directory "
                              "under it: record.json, samples.jsonl)")
    return ModelChoice(str(pretrained or model or "smollm2-135m"), backend, args, store or output_path or Path("runs"))


GREEDY = {"temperature": (0,), "do_sample": (False, "false", "False"), "top_p": (1,), "top_k": (0,)}


def greedy_gen_kwargs(spec: Optional[str], *, also: tuple[str, ...] = ()) -> Optional[str]:
    """lm-eval's `--gen_kwargs`: accepted where it asks for what every ctxbench backend does anyway (greedy decoding,
    as RULER scores) or names a key in `also` (lm-eval's own, for `ctxbench lmeval`); refused with one line otherwise."""
    for key, value in _kv([x for x in (spec or "").split(",") if x.strip()], "--gen_kwargs").items():
        if key not in also and value not in GREEDY.get(key, ()):
            lengths = f"{' and '.join(also)} pass to lm-eval" if also else "each task sets its own max new tokens " \
                      "(task arg tokens_to_generate)"
            raise ConfigError(f"--gen_kwargs: {key}={value}: ctxbench decodes greedily (temperature 0, as RULER does) and "
                              f"{lengths}; only temperature=0, do_sample=false, top_p=1 and top_k=0 are accepted")
    return spec


def log_samples_note(log_samples: bool) -> None:
    if log_samples:
        err.print("note: --log_samples: ctxbench always logs every sample (samples.jsonl in the run directory); "
                  "nothing to turn on", highlight=False)
