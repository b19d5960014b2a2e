"""Journeys: a study rerun after its runs were deleted, and study or method names that are paths (issue 21 items
19 and 25).

A step of a study is done only while its output is there and matches: deleting a study's runs/ (to re-score) and
rerunning scores again, instead of printing "no comparisons" over an empty report. A study or method name becomes a
directory, so a name that is a path (`../../X`, `..`) is refused with one line before anything is written.
The default tier's commands here run in process (`user_in_process`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from .conftest import User

STUDY = """\
name: tiny
corpus: {path: "stdlib:json", format: repo}
base_model: {config: {hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2,
             num_key_value_heads: 1, max_position_embeddings: 512}, tokenizer: smollm2-135m}
seq_len: 128
budget_tokens: 1024
seeds: [0]
reference: a
methods:
  - {name: a, data: {method: standard, eval_sequences: 2}}
  - {name: b, data: {method: standard, eval_sequences: 2}}
training: {max_steps: 2, per_device_batch_size: 2, save_steps: 1000, delete_checkpoints: true}
eval:
  backend: echo
  suite: {name: tiny-eval, lengths: [256], samples: 2, tasks: [{task: ruler/niah_single_1}]}
"""


@pytest.mark.parametrize(("old", "new", "named"), [("name: tiny", "name: ../../X", "'../../X'"),
                                                    ("{name: b,", "{name: '..',", "'..'")])
def test_a_name_that_is_a_path_is_refused(user_in_process: User, old: str, new: str, named: str):
    (user_in_process.cwd / "study.yaml").write_text(STUDY.replace(old, new))
    r = user_in_process.run("ctxbench study study.yaml")
    assert r.code == 2, r.err[-2000:]
    assert r.last_err_line.startswith("error: ") and named in r.last_err_line and "plain name" in r.last_err_line
    assert user_in_process.files() == {"study.yaml"}
    assert not (user_in_process.cwd.parent / "X").exists()  # studies/../../X


def test_a_scoring_step_is_done_only_while_its_run_is_complete(tmp_path: Path):
    from ctxbench.harness.core.io import append_jsonl, atomic_write_json
    from ctxbench.harness.studies.run import _scored, _State

    plan = SimpleNamespace(out_dir=tmp_path / "runs", run_id=lambda: "a_s0-tiny-eval-1")
    state = _State(tmp_path / "state.json")
    state.mark("a_s0-tiny-eval-1", "{}")
    assert not _scored(plan, state, "{}")  # state.json says done, the store has no such run
    run = tmp_path / "runs" / "a_s0-tiny-eval-1"
    atomic_write_json(run / "record.json", {"run_id": "a_s0-tiny-eval-1", "plan": {"ruler/niah_single_1": {"256": 2}}})
    append_jsonl(run / "samples.jsonl", [{"id": "ruler/niah_single_1@256#0", "error": None}])
    assert not _scored(plan, state, "{}")  # one of two samples
    append_jsonl(run / "samples.jsonl", [{"id": "ruler/niah_single_1@256#1", "error": None}])
    assert _scored(plan, state, "{}")
    assert not _scored(plan, state, '{"run_id": "another checkpoint"}')


@pytest.mark.slow
def test_deleted_runs_are_scored_again(user: User):
    (user.cwd / "study.yaml").write_text(STUDY)
    first = user.run("ctxbench study study.yaml", timeout=900)
    assert first.code == 0, first.err[-3000:]
    runs = user.cwd / "runs" / "studies" / "tiny" / "runs"
    before = sorted(p.name for p in runs.iterdir())
    shutil.rmtree(runs / before[0])  # one run deleted
    again = user.run("ctxbench study study.yaml", timeout=900)
    assert again.code == 0, again.err[-3000:]
    assert sorted(p.name for p in runs.iterdir()) == before
    shutil.rmtree(runs)  # every run deleted, to re-score
    again = user.run("ctxbench study study.yaml", timeout=900)
    assert again.code == 0, again.err[-3000:]
    assert "no comparisons" not in again.out and again.out.count(" − ") == first.out.count(" − ") > 0
    assert sorted(p.name for p in runs.iterdir()) == before
