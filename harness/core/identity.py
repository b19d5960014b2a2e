"""Run identity: one rule for what changes a result and what changes only speed, one hash, and resolved `auto`s.

The rule (below): every field of a backend's Args, a trainer config, a synthesis or generator config and the judge's
settings is result-changing (the default) or marked execution-only where it is declared; the scoring run id, the
generator fingerprint, the judge cache key and the training config hash all leave out the execution-only ones and hash
the rest with `content_hash`.

A resolved `auto` is identity: the run id hashes what ran, not what was asked.

`--dtype auto` picks bf16 on a CPU with native bf16 and fp32 elsewhere; hashing the word `auto` gave both one run id,
so a resume on another machine could mix precisions inside one run. A backend's plan view may say what its `auto`
arguments resolved to (`resolved_args()`, e.g. {"dtype": "bfloat16"}); the plan step puts those values in the run's
backend arguments before the run id is computed, and the weights load in them.

A run an older ctxbench stored under the id that hashed `auto` keeps that id where its record says it ran with the
same resolved values (a resume on the same machine); elsewhere the resolved id starts a run of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any


def resolved_values(view: Any) -> dict[str, Any]:
    """What the backend's `auto` arguments resolved to on this machine ({} when it resolves nothing)."""
    resolved = getattr(view, "resolved_args", None)
    return dict(resolved()) if callable(resolved) else {}


def resolve_auto(plan: Any, view: Any) -> Any:
    """The plan (a RunPlan) with its backend's resolved `auto` values among its backend arguments, unless an older run
    of the unresolved id ran with exactly those values (then it resumes under its id)."""
    values = resolved_values(view)
    if not values:
        return plan
    if _ran_with(Path(plan.out_dir) / plan.run_id(), values):
        return plan
    return dataclasses.replace(plan, backend_args={**plan.backend_args, **values})


def _ran_with(run_dir: Path, values: dict[str, Any]) -> bool:
    """Whether a stored run's record says it ran with these resolved values (its backend_args keep the backend's own
    info, the resolved dtype among them)."""
    try:
        ran = json.loads((run_dir / "record.json").read_text(encoding="utf-8")).get("backend_args") or {}
    except (OSError, ValueError, AttributeError):
        return False
    return all(ran.get(k) == v for k, v in values.items())


# --- the one identity rule ------------------------------------------------------------------------------------------
# Every field is result-changing (identity: a run id, a fingerprint, a cache key or a config hash hashes it) or
# execution-only (it changes how fast or where, never what comes out). The field says which where it is declared:
#
#     concurrency: int = Field(8, ge=1, description="...", json_schema_extra=EXECUTION)
#
# A field that says nothing is identity (the safe default: a forgotten mark costs a recomputation, never a mix).
# A model that passes unknown keys through (extra="allow", e.g. lm-eval's model args) names the passed-through keys
# that are execution-only in `execution_extras`.
EXECUTION: dict[str, Any] = {"execution": True}

# The execution-only arguments of a backend that declares no Args model (a plugin registered without `args=`): the
# in-tree backends' execution fields, as every backend had them before each declared its own (kept, so such a
# plugin's stored runs keep their ids; tests/test_identity_rule.py checks it is the union of the in-tree ones).
DEFAULT_EXECUTION_ARGS = frozenset({
    "threads", "batch_size", "device", "delay", "attn_implementation",  # hf, echo
    "concurrency", "max_retries", "backoff", "backoff_max", "rpm", "timeout", "connect_timeout", "api_key_env",  # openai
    "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_num_seqs",
    "max_num_batched_tokens", "enforce_eager", "enable_prefix_caching", "enable_chunked_prefill",  # vllm
    "chunk_size",  # lmeval
})


def content_hash(obj: Any, n: int | None = 16, *, default: Any = None) -> str:
    """The one identity hash: sha256 of canonical JSON, cut to n hex digits (None: all 64). Canonical as every stored
    id was hashed: sorted keys, json's default separators and ASCII escapes, so no existing id moves."""
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True, default=default).encode()).hexdigest()
    return digest if n is None else digest[:n]


def is_execution(field: Any) -> bool:
    """Whether a pydantic field is marked execution-only (json_schema_extra={"execution": True})."""
    extra = getattr(field, "json_schema_extra", None)
    return isinstance(extra, dict) and extra.get("execution") is True


def execution_fields(model: type) -> frozenset[str]:
    """A pydantic model's execution-only fields: those marked where declared, and its `execution_extras`."""
    marked = {name for name, f in getattr(model, "model_fields", {}).items() if is_execution(f)}
    return frozenset(marked) | frozenset(getattr(model, "execution_extras", ()))


def identity_dump(config: Any) -> dict[str, Any]:
    """A config's fields that can change a result (JSON form): its execution-only fields left out."""
    return config.model_dump(mode="json", exclude=set(execution_fields(type(config))))


def backend_args_model(backend: str) -> type | None:
    """The Args model a backend declared when it registered (`register("backend", NAME, args=Model)`); `lmeval:hf`
    falls back to `lmeval`'s. None: the backend declares none."""
    from ctxbench.harness.core import registry

    for name in dict.fromkeys((backend, str(backend).split(":", 1)[0])):
        model = registry.info("backend", name).get("args")
        if model is not None:
            return model
    return None


def backend_execution_args(backend: str) -> frozenset[str]:
    """The backend's execution-only arguments: those its declared Args model marks; a key it does not declare falls
    to DEFAULT_EXECUTION_ARGS (the backend refuses it anyway, so it can change no result)."""
    model = backend_args_model(backend)
    if model is None:
        return DEFAULT_EXECUTION_ARGS
    return execution_fields(model) | (DEFAULT_EXECUTION_ARGS - set(model.model_fields))


def identity_args(backend: str, args: dict[str, Any]) -> dict[str, Any]:
    """The backend arguments that can change a result (what run ids and fingerprints hash)."""
    execution = backend_execution_args(backend)
    return {k: v for k, v in args.items() if k not in execution}


def execution_args(backend: str, args: dict[str, Any]) -> dict[str, Any]:
    """The backend arguments that change only speed (recorded per session, never hashed)."""
    execution = backend_execution_args(backend)
    return {k: v for k, v in args.items() if k in execution}
