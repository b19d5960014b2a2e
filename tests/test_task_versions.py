"""A task's version is run identity: a run scored under old rules is never resumed under new ones."""

from __future__ import annotations

from pathlib import Path

from ctxbench.harness.core.config import Suite
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.task_versions import suite_task_versions, task_version
from ctxbench.harness.run.planning import RunPlan


def _plan(tasks: list[str], tmp_path: Path) -> RunPlan:
    suite = Suite(name="s", lengths=[1024], samples=2, tasks=tasks)
    return RunPlan(suite=suite, model="m", backend="echo", backend_args={}, out_dir=tmp_path)


def test_tasks_whose_scoring_changed_declare_a_version():
    for name in ("helmet/rag_nq", "helmet/rerank_msmarco", "judge/qa", "judge/summary", "nolima/needles"):
        assert task_version(name) == 1, name
    assert task_version("ruler/niah_single_1") == 0
    assert task_version("no/such-task") == 0


def test_version_zero_tasks_keep_their_run_ids(tmp_path, monkeypatch):
    plan = _plan(["ruler/niah_single_1", "ruler/vt"], tmp_path)
    assert suite_task_versions(plan.suite) == {}
    monkeypatch.setattr("ctxbench.harness.run.planning.suite_task_versions", lambda suite: {})
    assert _plan(["ruler/niah_single_1", "ruler/vt"], tmp_path).run_id() == plan.run_id()


def test_a_versioned_task_gives_a_new_run_id(tmp_path, monkeypatch):
    plan = _plan(["ruler/niah_single_1", "nolima/needles"], tmp_path)
    assert suite_task_versions(plan.suite) == {"nolima/needles": 1}
    versioned = plan.run_id()
    monkeypatch.setattr("ctxbench.harness.run.planning.suite_task_versions", lambda suite: {})
    assert plan.run_id() != versioned  # the id the old scoring's runs have: not resumed


def test_a_plugin_declares_its_version(tmp_path, scratch):
    register("task", "test-only/versioned", version=3)(lambda **args: None)  # a plugin's entry, never built
    plan = _plan(["test-only/versioned"], tmp_path)
    assert suite_task_versions(plan.suite) == {"test-only/versioned": 3}
