"""Issue 21 items 4 and 16: a resume with a changed execution setting continues the same run, and a run written by
an older ctxbench (schema 2, commit 4eafb19) is read, resumed and put on the board.

The run id and the resume check depend only on what can change a prediction (weights, tokenizer, template, task
args, seed, dtype, truncation); batch size, threads, device, delay, concurrency and retries are recorded per session.
The default tier's commands here run in process (`user_in_process`).
"""

from __future__ import annotations

import collections
import json
import shutil
import signal
from pathlib import Path

import pytest

from .conftest import rows, stop, wait_for

SUITE = """name: j
lengths: [512]
samples: 4
tasks:
  - ruler/niah_single_1
"""
SCHEMA2 = Path(__file__).parent / "data" / "schema2-store"  # a run dir as 4eafb19 wrote it, stopped at 5/8 samples


def _ids(run_dir: Path) -> collections.Counter:
    return collections.Counter(json.loads(line)["id"] for line in rows(run_dir))


@pytest.mark.slow  # ~15 s; an execution change on resume stays in the default tier (the schema-2 journey)
def test_resume_with_another_batch_size_continues_the_same_run(user):
    (user.cwd / "s.yaml").write_text(SUITE)
    command = "ctxbench score --backend echo --backend-arg delay=1 --batch-size 1 --suite s.yaml"
    proc = user.start(command)
    wait_for(lambda: any(len(rows(d)) >= 2 for d in (user.cwd / "runs").glob("*")))
    assert stop(proc, signal.SIGINT).code == 130

    r = user.run(command.replace("--batch-size 1", "--batch-size 2"))
    assert r.code == 0, r.err
    run_dirs = list((user.cwd / "runs").iterdir())
    assert len(run_dirs) == 1, "a changed batch size started a new run"
    ids = _ids(run_dirs[0])
    assert sorted(ids) == [f"ruler/niah_single_1@512#{i}" for i in range(4)]
    assert set(ids.values()) == {1}, f"a sample was scored twice: {ids}"
    record = json.loads((run_dirs[0] / "record.json").read_text())
    assert record["schema_version"] == 3
    sessions = record["sessions"]
    assert [s["execution"]["batch_size"] for s in sessions] == [1, 2]
    assert all(s["ended"] >= s["started"] for s in sessions), "every session says when it ended (item 16)"


def test_a_schema2_run_resumes_after_an_execution_change_and_reaches_the_board(user_in_process):
    shutil.copytree(SCHEMA2 / "smollm2-135m-j-756bd799", user_in_process.cwd / "runs" / "smollm2-135m-j-756bd799")
    shutil.copy(SCHEMA2 / "j.yaml", user_in_process.cwd / "j.yaml")
    run_dir = user_in_process.cwd / "runs" / "smollm2-135m-j-756bd799"
    before = _ids(run_dir)
    assert sum(before.values()) == 5

    r = user_in_process.run("ctxbench score --backend echo --suite j.yaml --batch-size 2")  # 4eafb19 ran it with batch_size 4
    assert r.code == 0, r.err
    assert [p.name for p in (user_in_process.cwd / "runs").iterdir()] == [run_dir.name], "the old run was not resumed"
    after = _ids(run_dir)
    assert sum(after.values()) == 8 and set(after.values()) == {1}, f"samples redone: {after}"
    record = json.loads((run_dir / "record.json").read_text())
    assert record["schema_version"] == 3 and len(record["sessions"]) == 2

    board = user_in_process.run("ctxbench board build --store runs --out board")
    assert board.code == 0, board.err
    assert (user_in_process.cwd / "board" / "results.csv").is_file()


def test_the_store_reads_a_schema2_record(tmp_path):
    from ctxbench.harness.core.store import RunStore, list_runs

    shutil.copytree(SCHEMA2 / "smollm2-135m-j-756bd799", tmp_path / "smollm2-135m-j-756bd799")
    (store,) = list_runs(tmp_path)
    assert store.read_record()["schema_version"] == 2
    assert len(store.done_ids()) == 5
    assert RunStore(tmp_path, "smollm2-135m-j-756bd799").latest()


def test_a_session_says_where_batch_composition_can_change_greedy_outputs():
    from ctxbench.harness.core.config import load_suite
    from ctxbench.harness.run.runner import RunPlan, execution

    plan = RunPlan(load_suite(str(SCHEMA2 / "j.yaml")), "m", "hf", {"batch_size": 0, "threads": 2}, Path("runs"))
    assert plan.identity_args() == {} and plan.execution_args() == {"batch_size": 0, "threads": 2}
    gpu = execution(plan, {"device": "cuda:0", "dtype": "bfloat16", "batch_size": 16}, [])
    assert gpu["batch_size"] == 16 and "batch" in gpu["batch_dependent"]
    cpu = execution(plan, {"device": "cpu", "dtype": "float32", "batch_size": 1, "threads": 2}, [])
    assert "batch_dependent" not in cpu and cpu["threads"] == 2
