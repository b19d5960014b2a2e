"""A resolved `auto` is identity: the run id hashes what ran, not what was asked.

`--dtype auto` picks bf16 on a CPU with native bf16 and fp32 elsewhere; hashing the word `auto` gave both one run id,
so a resume on another machine could mix precisions inside one run. A backend's plan view may say what its `auto`
arguments resolved to (`resolved_args()`, e.g. {"dtype": "bfloat16"}); the plan step puts those values in the run's
backend arguments before the run id is computed, and the weights load in them.

A run an older ctxbench stored under the id that hashed `auto` keeps that id where its record says it ran with the
same resolved values (a resume on the same machine); elsewhere the resolved id starts a run of its own.
"""

from __future__ import annotations

import dataclasses
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
