"""Issue 31, "`--dtype auto` gives one run id different numbers": the run id hashes the dtype `auto` resolved to, so a
machine that picks bf16 and one that picks fp32 never share a run; a run an older ctxbench stored under the id that
hashed `auto` is resumed where it ran in the dtype resolved now; the board shows the precision that ran."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ctxbench.harness.backends import cpu
from ctxbench.harness.core.config import adhoc_suite
from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord
from ctxbench.harness.run.planning import RunPlan, prepare
from ctxbench.leaderboard.store_frame import load_store, precision


@pytest.fixture
def plan(tmp_path, data_dir) -> RunPlan:
    suite = adhoc_suite("ruler/niah_single_1", lengths=[512], samples=1)
    return RunPlan(suite, "smollm2-135m", "hf", {"device": "cpu", "threads": 1}, tmp_path / "runs", data_dir)


def picks(monkeypatch, dtype: str) -> None:
    """This machine's `auto` measurement says `dtype` is the faster."""
    monkeypatch.setattr(cpu, "cpu_dtype", lambda *a: (dtype, {"dtype": dtype, "seconds": {}}))


def test_auto_resolving_to_other_dtypes_gives_other_run_ids(plan, monkeypatch):
    picks(monkeypatch, "bfloat16")
    bf16 = prepare(plan)
    picks(monkeypatch, "float32")
    fp32 = prepare(plan)
    assert bf16.store.dir.name != fp32.store.dir.name
    assert bf16.identity["identity_args"]["dtype"] == "bfloat16" and fp32.identity["identity_args"]["dtype"] == "float32"
    assert fp32.model.args["dtype"] == "float32"  # the weights load in the dtype the id hashed
    explicit = prepare(dataclasses.replace(plan, backend_args={**plan.backend_args, "dtype": "float32"}))
    assert explicit.store.dir.name == fp32.store.dir.name  # `auto` that picked fp32 is --dtype float32


def _old_auto_run(plan: RunPlan, ran: str) -> str:
    """A run an older ctxbench stored under the id that hashed `auto` (its record keeps the dtype that ran)."""
    run_id = plan.run_id()
    store = RunStore(plan.out_dir, run_id)
    store.dir.mkdir(parents=True)
    rec = RunRecord(run_id=run_id, created="2026-01-01T00:00:00", suite="adhoc", suite_config={}, model=plan.model,
                    backend="hf", backend_args={"device": "cpu", "dtype": ran}, tokenizer="", tokenizer_fingerprint="",
                    template="", seed=42, truncation="refuse", versions={}, command=[])
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    return run_id


def test_an_old_auto_run_resumes_only_in_the_dtype_it_ran(plan, monkeypatch):
    old = _old_auto_run(plan, ran="float32")
    picks(monkeypatch, "float32")
    assert prepare(plan).store.dir.name == old  # the same machine: resumed under its id
    picks(monkeypatch, "bfloat16")
    assert prepare(plan).store.dir.name != old  # another precision never joins it


def _run(root, run_id, dtype, score):
    store = RunStore(root, run_id)
    store.dir.mkdir(parents=True)
    rec = RunRecord(run_id=run_id, created="2026-01-01T00:00:00", suite="s", suite_config={}, model="m", backend="hf",
                    backend_args={"dtype": dtype}, tokenizer="", tokenizer_fingerprint="", template="", seed=42,
                    truncation="refuse", versions={}, command=[], label="m", model_fingerprint="dir:1",
                    plan={"t": {"512": 1}})
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    store.append([{"id": "t@512#0", "task": "t", "length": 512, "index": 0, "score": score, "prompt_hash": "p"}])


def test_the_board_keeps_two_precisions_apart_and_names_them(tmp_path):
    _run(tmp_path, "a", "bfloat16", 1.0)
    _run(tmp_path, "b", "float32", 0.0)
    frames = load_store(tmp_path)
    assert dict(zip(frames.scores["model"], frames.scores["score"])) == {"m [bfloat16]": 1.0, "m [float32]": 0.0}
    assert set(frames.runs["precision"]) == {"bfloat16", "float32"}


def test_an_old_record_of_auto_reads_without_a_precision():
    assert precision({"backend_args": {"dtype": "auto"}}) == "" and precision({}) == ""
