"""The task contract is declared (issue 23): Task names every optional capability with a default, the runner
dispatches on them (no hasattr/getattr on a task), and a factory that returns something else is refused in one line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ctxbench.harness.core import registry
from ctxbench.tasks.base import Task

REPO = Path(__file__).resolve().parents[1]
CAPABILITIES = ("needs", "external", "extra", "score_row", "samples_at", "logprob_requests", "score_logprobs",
                "run_external", "is_complete", "write_aggregates", "prepare", "data_files", "samples_per_length")


def test_task_declares_every_capability():
    assert all(hasattr(Task, name) for name in CAPABILITIES)


def test_every_shipped_task_is_a_task():
    for name, factory in registry.entries("task").items():
        if registry.origin("task", name) is None:
            assert isinstance(factory(), Task), name


@pytest.mark.parametrize("path", ["harness/run/runner.py", "harness/run/planning.py", "harness/run/full.py", "harness/run/sequential.py",
                                  "harness/run/batch.py", "harness/lmeval_export/__init__.py",
                                  "harness/lmeval_export/tasklib.py", "harness/core/datasets.py", "harness/core/config.py"])
def test_the_runner_never_probes_a_task(path):
    calls = [n for n in ast.walk(ast.parse((REPO / path).read_text())) if isinstance(n, ast.Call)
             and getattr(n.func, "id", "") in ("hasattr", "getattr") and n.args
             and "task" in ast.unparse(n.args[0]).lower()]
    assert not calls, [ast.unparse(c) for c in calls]


def test_a_factory_that_returns_no_task_is_one_line(ctxbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(registry._REGISTRY["task"], "contract/not_a_task", lambda **_: object())
    code, out, err = ctxbench("score", "--tasks", "contract/not_a_task", "--lengths", "256", "--backend", "echo")
    assert code == 2 and "not a Task" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "runs").exists()
