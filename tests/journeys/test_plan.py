"""Issue 24 B2: `ctxbench plan` says what a suite will cost before it runs, from a pilot run's speed and scores.

A user pilots a suite (a few samples), then asks the plan for the full suite: the expected samples and time of
`--until effective-length` beside the full protocol's, the smallest difference two models can show, and the N to
detect a given one. The plan writes nothing; bad input is one line, exit 2.
The default tier's commands here run in process (`user_in_process`).
"""

from __future__ import annotations

import pytest

SUITE = """name: planned
lengths: [512, 1024]
samples: 200
tasks:
  - kv/retrieval
  - ruler/niah_single_1
"""


def test_plan_from_a_pilot_run(user_in_process):
    (user_in_process.cwd / "suite.yaml").write_text(SUITE)
    pilot = user_in_process.run("ctxbench score --backend echo --backend-arg delay=0.01 --suite suite.yaml --samples 3")
    assert pilot.code == 0, pilot.err
    (run_dir,) = (user_in_process.cwd / "runs").iterdir()
    before = user_in_process.files()

    r = user_in_process.run(f"ctxbench plan --suite suite.yaml --from runs/{run_dir.name} --pilot runs/{run_dir.name} "
                 "--detect 10")

    assert r.code == 0, r.err
    assert "full protocol 410 samples" in r.out  # 2 lengths x (kv/retrieval's 5 gold positions + 200), as score plans
    assert "samples/s (mean" in r.out and "--until effective-length" in r.out
    table = [line for line in r.out.splitlines() if line.startswith("│")]
    assert [line.split("│")[1].strip() for line in table] == ["512", "1K"]  # a row per length, with its pilot score
    assert "whole suite:" in r.out and "of the full protocol" in r.out
    assert "smallest detectable difference" in r.out and "to detect 10 points at one length: N=" in r.out
    assert user_in_process.files() == before, "a plan wrote to disk"


def test_plan_without_scores_shows_what_each_score_would_cost(user_in_process):
    r = user_in_process.run("ctxbench plan --suite ruler --samples-per-second 4 --width 10")
    assert r.code == 0, r.err
    assert "full protocol 39,000 samples" in r.out and "~2.7 h" in r.out
    assert "if a length scores" in r.out and "--until width=10" in r.out
    assert user_in_process.files() == set()


@pytest.mark.parametrize("args,line", [
    ("--scores 64k=90", "error: --scores: 64K is not a length of the suite (1K, 2K)"),
    ("--scores 1k=90,2k", "error: --scores: expected LENGTH=POINTS like 4k=92,8k=81, got '2k'"),
    ("--scores 1k=0.9,2k=120", "error: --scores: '2k=120': give a score in points (0-100) per length, e.g. 4k=92"),
    ("--samples-per-second 0", "error: --samples-per-second: 0 must be above 0; e.g. 2.5"),
    ("--from runs/nothing", "error: --from: runs/nothing is not a run directory (no record.json); pass runs/<run id>"),
    ("--detect 0.05", "error: --detect: a difference in points between 0.5 and 100 (5 = five points), got 0.05"),
    ("--alpha 0.7", "error: --alpha: must be between 0 and 0.5, got 0.7"),
])
def test_bad_plan_input_is_one_line(ctxbench, tmp_path, monkeypatch, args, line):
    monkeypatch.chdir(tmp_path)
    code, out, err = ctxbench("plan", "--suite", "ruler-quick", *args.split())
    assert (code, err.strip()) == (2, line)
    assert list(tmp_path.iterdir()) == []


def test_plan_as_json_for_scripts(ctxbench, tmp_path, monkeypatch):
    import json

    monkeypatch.chdir(tmp_path)
    code, out, err = ctxbench("plan", "--suite", "ruler-quick", "--scores", "1k=99,2k=50", "--json")
    assert code == 0, err
    plan = json.loads(out)
    (target,) = plan["targets"]
    assert [(row["length"], row["score"]) for row in target["rows"]] == [(1024, 99.0), (2048, 50.0)]
    assert target["total_samples"] < plan["full_samples"] and plan["full_seconds"] is None
