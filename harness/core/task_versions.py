"""A task's version: part of a run's identity once it is above 0.

A task whose prompts or scoring change declares `version=N` when it registers (`register("task", name, version=N)`).
A run hashes {task: version} for the tasks of its suite above 0, so a run scored under the old rules is never resumed
by the new ones: its stored rows would mix two scorings in one cell. Tasks at version 0 hash as they always did, so
their runs keep their ids.
"""

from __future__ import annotations

from typing import Any

from ctxbench.harness.core.registry import info

# Why each in-tree task left version 0 (the changelog has the details); a plugin documents its own.
HISTORY = {
    1: "2026-11-26: HELMET RAG/re-rank/ICL scored as HELMET's code runs; the judge reads verdicts as HELMET's scripts "
       "do, with HELMET's sampling; NoLiMa sends its official system message; 2026-11-27: RULER v2's prompt fills "
       "the length and the answer goes past it, as its official code ran (prompt_fills_length now defaults to true)",
}


def task_version(name: str) -> int:
    """The version a registered task declared (0 when it declared none, or when no task has the name)."""
    value = info("task", name).get("version", 0)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def suite_task_versions(suite: Any) -> dict[str, int]:
    """{task: version} for the suite's tasks above version 0 (empty for a suite of version-0 tasks)."""
    return {spec.task: v for spec in suite.tasks if (v := task_version(spec.task))}
