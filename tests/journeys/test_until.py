"""Journey (issue 24 Part B): `ctxbench score --until effective-length`, as a user types it.

The echo backend's `accuracy` argument answers each sample right with a probability per length, drawn from the
sample id, so a length at 1.0 is clearly above the threshold and one at 0.0 clearly below. The run stops each length
once its verdict is settled, says so (the printed lines, adaptive.json, the record), the board marks the prefix
cells, a rerun without --until extends the same run to N without redoing a sample, and Ctrl-C then a rerun resumes.
The default tier's commands here run in process (`user_in_process`).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from .conftest import User, rows, stop, wait_for
from .test_board import main_rows

N = 40  # samples per task and length: the full protocol; 512 settles after 28 rounds, 1024 after 4 (any N)
SCORE = ("ctxbench score --backend echo --tasks ruler/niah_single_1,ruler/niah_single_2 --lengths 512,1024 "
         f"--samples {N} --label seq --backend-arg 'accuracy={{\"512\": 1.0, \"1024\": 0.0}}'")


def run_dir(user: User) -> Path:
    (found,) = [p for p in (user.cwd / "runs").iterdir() if (p / "record.json").is_file()]
    return found


def ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in rows(path)]


def test_until_stops_settled_lengths_the_board_marks_them_and_a_plain_rerun_extends_to_n(user_in_process: User, data_dir):
    r = user_in_process.run(f"{SCORE} --until effective-length")
    assert r.code == 0, r.err
    assert "512: settled above" in r.out and "1024: settled below" in r.out, r.out
    run = run_dir(user_in_process)
    state = json.loads((run / "adaptive.json").read_text())
    assert state["rule"] == {"until": "effective-length", "alpha": 0.05, "threshold": 85.6}
    above, below = state["lengths"]["512"], state["lengths"]["1024"]
    assert (above["decision"], below["decision"]) == ("above", "below") and above["settled"] and below["settled"]
    assert below["rounds"] < above["rounds"] < N  # both stopped early; the clear failure much earlier
    assert state["cells"]["ruler/niah_single_2"] == {"512": above["rounds"], "1024": below["rounds"]}
    scored = ids(run)
    assert len(scored) == 2 * (above["rounds"] + below["rounds"]) < 4 * N
    assert {i.split("#")[0] for i in scored} == {f"ruler/niah_single_{t}@{L}" for t in (1, 2) for L in (512, 1024)}
    assert max(int(i.split("#")[1]) for i in scored if "@1024" in i) == below["rounds"] - 1  # rounds 0, 1, ...: a prefix
    record = json.loads((run / "record.json").read_text())
    assert record["sessions"][-1]["execution"]["until"] == "effective-length"

    b = user_in_process.run("ctxbench board build")
    assert b.code == 0, b.err
    row = main_rows(user_in_process.cwd / "board")["seq"]
    assert row["1K"].endswith(f"n={2 * below['rounds']}/{2 * N} ‡"), row  # a prefix never looks like a full-N cell
    assert "‡" in row["Avg"]
    board = (user_in_process.cwd / "board" / "leaderboard.md").read_text()
    assert "‡ sequential (ctxbench score --until)" in board
    assert f"1024: settled below after {below['rounds']} of {N} rounds" in board

    again = user_in_process.run(SCORE)  # the same command without --until: the same run, extended to N
    assert again.code == 0, again.err
    assert ids(run)[: len(scored)] == scored and len(ids(run)) == len(set(ids(run))) == 4 * N
    assert user_in_process.run("ctxbench board build").code == 0
    row = main_rows(user_in_process.cwd / "board")["seq"]
    assert row["1K"].endswith(f"n={2 * N}") and "‡" not in row["1K"] + row["512"], row


@pytest.mark.slow  # ~12 s; the rounds' recomputation from stored rows is tests/test_adaptive.py's, Ctrl-C's resume test_signals'
def test_ctrl_c_then_rerun_resumes_the_rounds(user: User, data_dir):
    command = f"{SCORE} --until effective-length"
    proc = user.start(f"{command} --backend-arg delay=0.05")
    runs = user.cwd / "runs"
    wait_for(lambda: runs.is_dir() and any(len(rows(d)) >= 12 for d in runs.iterdir() if d.is_dir()))
    r = stop(proc, signal.SIGINT)
    assert r.code == 130 and "rerun the same command to resume" in r.last_err_line, r.err
    run = run_dir(user)
    before = ids(run)
    assert json.loads((run / "adaptive.json").read_text())["lengths"]["512"]["stopped"] == "running"

    again = user.run(command)  # delay is a speed setting: the same run
    assert again.code == 0, again.err
    after = ids(run)
    assert after[: len(before)] == before and len(after) == len(set(after))  # nothing redone
    state = json.loads((run / "adaptive.json").read_text())
    assert [state["lengths"][k]["decision"] for k in ("512", "1024")] == ["above", "below"]
    assert len(after) == 2 * sum(state["lengths"][k]["rounds"] for k in ("512", "1024"))


@pytest.mark.slow  # ~18 s; the --vs decision is tests/leaderboard/test_sequential.py's
def test_vs_stops_once_the_sign_is_settled(user: User, data_dir):
    base = "ctxbench score --backend echo --tasks ruler/niah_single_1 --lengths 512 --samples 60"
    assert user.run(f"{base} --label a --backend-arg accuracy=1.0").code == 0
    (earlier,) = (user.cwd / "runs").iterdir()
    r = user.run(f"{base} --label b --backend-arg accuracy=0.0 --vs runs/{earlier.name}")
    assert r.code == 0, r.err
    assert "512: settled negative" in r.out, r.out
    state = json.loads(next((user.cwd / "runs").glob("b-*/adaptive.json")).read_text())
    assert state["rule"]["until"] == "vs" and state["lengths"]["512"]["rounds"] < 60
    other = user.run(f"{base} --label c --backend-arg accuracy=0.0 --vs runs/{earlier.name} --seed 7")
    assert other.code == 2 and "--vs: " in other.last_err_line and "pass --seed 42" in other.last_err_line, other.err
    assert not list((user.cwd / "runs").glob("c-*"))  # refused before anything is written


def test_bad_sequential_values_are_refused_before_anything_is_written(ctxbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    score = ["score", "--backend", "echo", "--tasks", "ruler/niah_single_1", "--lengths", "512"]
    cases = [
        (["--until", "sometimes"], "--until: unknown rule 'sometimes'; use effective-length or width=W"),
        (["--until", "width=0"], "--until: width must be between 0 and 100 points"),
        (["--until", "effective-length", "--alpha", "0.7"], "--alpha: must be between 0 and 0.5"),
        (["--threshold", "90"], "--threshold: only with --until or --vs"),
        (["--until", "effective-length", "--shard", "0/2"], "--until: a round spans every task"),
        (["--vs", "runs/nowhere"], "--vs: runs/nowhere is not a run directory"),
    ]
    for extra, line in cases:
        code, _, err = ctxbench(*score, *extra)
        assert code == 2 and line in err and len(err.strip().splitlines()) == 1, (extra, err)
    assert list(tmp_path.iterdir()) == []
