"""`ctxbench plan` and `score --until` refuse the same tasks (issue 34 item 5, issue 31's clustered refusal).

`score --until` refuses a task whose samples carry a cluster id (sequential_checks.check_clusters); `plan` builds no
sample, so it refuses a task that declares Task.shared_context. One source of truth: a task declares shared_context
exactly when its samples carry a cluster id. Checked over EVERY registered task from the code that builds its
samples' meta (most need data no test may download), and on built samples where the data is in the shared test data.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from functools import cache
from pathlib import Path

import pytest

from ctxbench.harness.core import datasets, registry
from ctxbench.harness.core.config import TaskSpec, build_task, load_suite, shipped_suite_files
from ctxbench.harness.run.sequential_checks import declared_cluster_refusal
from ctxbench.tasks.base import Task

SHIPPED_TASKS = sorted(n for n in registry.names("task") if registry.origin("task", n) is None)


@cache
def _class_sets_cluster(cls: type) -> bool:
    """Whether the class's own code builds a dict with a "cluster" key (a sample's meta)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return False
    return any(_names_cluster(node) for node in ast.walk(tree))


def _names_cluster(node: ast.AST) -> bool:
    """{"cluster": ...}, meta["cluster"] = ... or dict(..., cluster=...): the ways code puts a cluster id in meta."""
    is_key = lambda k: isinstance(k, ast.Constant) and k.value == "cluster"  # noqa: E731
    if isinstance(node, ast.Dict):
        return any(is_key(k) for k in node.keys)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
        return is_key(node.slice)
    return isinstance(node, ast.Call) and any(k.arg == "cluster" for k in node.keywords)


def emits_cluster(task: Task) -> bool:
    """Whether any class the task inherits its sample building from puts a cluster id in a sample's meta."""
    return any(_class_sets_cluster(cls) for cls in type(task).__mro__ if cls not in (Task, object))


def test_the_code_check_sees_clusters():
    """The check can fail: a task that sets "cluster" without declaring it is seen, one that sets none is not."""

    class Undeclared(Task):
        def generate(self, *, length, index, seed, ctx):
            return {"cluster": f"x:{length}"}

    class Assigned(Task):
        def generate(self, *, length, index, seed, ctx):
            meta = {}
            meta["cluster"] = "x"
            return meta

    class Plain(Task):
        def generate(self, *, length, index, seed, ctx):
            return {"depth": 50, "seen": {}.get("cluster")}

    assert emits_cluster(Undeclared.__new__(Undeclared)) and emits_cluster(Assigned.__new__(Assigned))
    assert not emits_cluster(Plain.__new__(Plain))


@pytest.mark.parametrize("name", SHIPPED_TASKS)
def test_a_task_declares_shared_context_exactly_when_its_samples_carry_clusters(name):
    task = registry.get("task", name)()
    assert bool(task.shared_context) == emits_cluster(task), (
        f"{name}: declares shared_context={task.shared_context!r} but its samples "
        f"{'carry' if emits_cluster(task) else 'carry no'} cluster id")


@pytest.mark.parametrize("name", ["niah/single", "ruler/niah_single_1", "kv/retrieval"])
def test_built_samples_agree_with_the_declaration(name, gen_ctx):
    """On samples actually built (the data in the shared test data): a cluster id ⇔ shared_context."""
    task = build_task(TaskSpec(task=name))
    task.prepare(gen_ctx)
    samples = list(datasets.iter_samples(task, length=512, indices=[0, 1], seed=42, ctx=gen_ctx, use_cache=False))
    assert all((s.meta.get("cluster") is not None) == bool(task.shared_context) for s in samples), name


def test_a_real_data_task_s_samples_agree_with_the_declaration(smol_tokenizer, tmp_path, monkeypatch):
    """LongBench from a local file in its official format: every sample names its document's cluster."""
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    rows = [{"input": f"Question {i}?", "context": "One shared document. " * 20, "answers": [f"answer {i}"],
             "length": 3000, "dataset": "qasper", "language": "en", "all_classes": None, "_id": f"id{i}"}
            for i in range(2)]
    data = tmp_path / "qasper_e.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=tmp_path)
    task = registry.get("task", "longbench/qasper_e")(data_file=str(data))
    first, second = (task.generate(length=512, index=i, seed=0, ctx=ctx) for i in range(2))
    assert task.shared_context and first.meta["cluster"] == second.meta["cluster"] is not None


def _suite_refused_by_score(suite) -> bool:
    """What score --until's check_clusters sees: a task of the suite whose samples carry a cluster id."""
    return any(emits_cluster(build_task(spec)) for spec in suite.tasks)


@pytest.mark.parametrize("suite_name", sorted(shipped_suite_files()))
def test_plan_refuses_a_shipped_suite_exactly_when_score_until_does(suite_name):
    suite = load_suite(suite_name)
    assert (declared_cluster_refusal(suite) is not None) == _suite_refused_by_score(suite), suite_name


def test_plan_and_score_until_refuse_the_niah_grid_alike(ctxbench, tmp_path, data_dir):
    """End to end on a suite that was planned with --until tables before: plan prints score's refusal."""
    code, planned, err = ctxbench("plan", "--suite", "niah-grid", "--json")
    assert code == 0, err
    refused = json.loads(planned).get("until_refused") or ""
    assert refused.startswith("--until: niah/single")
    code, _, err = ctxbench("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "niah-grid",
                            "--data-dir", str(Path(data_dir)), "--store", str(tmp_path / "runs"),
                            "--until", "effective-length")
    scored = " ".join(err.split()).removeprefix("error: ")
    assert code == 2 and scored.split(" (")[0] in refused and refused.split("), ")[1] in scored
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.jsonl"))
