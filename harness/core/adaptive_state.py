"""The read side of a sequential run's state (`adaptive.json` in the run directory), for the store's readers.

In core so the board (leaderboard/) reads it without importing the run loop; harness/run/until.py writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ADAPTIVE_FILE = "adaptive.json"
FINAL = ("settled", "reached N", "end of the earlier run")  # a length that will not score more under this rule


def read_state(run_dir: Path) -> dict[str, Any]:
    """adaptive.json of a run ({} when it was never scored adaptively, or the file is unreadable). Each length names
    the task set its rounds average (`tasks`; from its cells where a file written before that field lacks it)."""
    try:
        state = json.loads((Path(run_dir) / ADAPTIVE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return with_task_sets(state) if isinstance(state, dict) else {}


def with_task_sets(state: dict[str, Any]) -> dict[str, Any]:
    """The state with each length's `tasks` (from its cells where the length does not name them)."""
    cells = state.get("cells") if isinstance(state.get("cells"), dict) else {}
    for length, v in (state.get("lengths") or {}).items():
        if isinstance(v, dict) and "tasks" not in v:
            v["tasks"] = sorted(task for task, per in cells.items() if isinstance(per, dict) and length in per)
    return state


def stopped_samples(state: dict[str, Any]) -> dict[tuple[str, int], int]:
    """(task, length) -> the stopping round of each cell whose length stopped for good: its later samples were never
    meant to run (the board counts them as stopped, not pending)."""
    final = {k for k, v in (state.get("lengths") or {}).items() if v.get("stopped") in FINAL}
    return {(task, int(length)): int(r) for task, per in (state.get("cells") or {}).items()
            for length, r in per.items() if length in final}


def summary_lines(state: dict[str, Any], lengths: Iterable[int] | None = None) -> list[str]:
    """One line per length in words: settled (which way, after how many rounds) or reached N undecided."""
    lines = []
    for key, v in sorted((state.get("lengths") or {}).items(), key=lambda kv: int(kv[0])):
        if lengths is not None and int(key) not in lengths:
            continue
        where = f"[{100 * v['lo']:.1f}, {100 * v['hi']:.1f}]" if v.get("lo") is not None else ""
        rounds = f"{v.get('rounds', 0)} of {v.get('n', '?')} rounds"
        if v.get("settled"):
            lines.append(f"{key}: settled {v.get('decision')} {where} after {rounds}")
        elif v.get("stopped") in FINAL:
            tail = "; the tasks with more samples go on to theirs at fixed N" if v.get("n_max") else ""
            lines.append(f"{key}: {v.get('decision', 'undecided')} {where} at {v.get('stopped')} ({rounds}{tail})")
        elif v.get("stopped") == "failed samples":
            lines.append(f"{key}: not settled: failed samples stand {where} after {rounds}; rerun the same command "
                         "to retry them")
        else:
            lines.append(f"{key}: not settled yet {where} after {rounds} ({v.get('stopped', 'running')})")
    return lines
