"""Issue 31 items 9 and "Smaller", issue 32 Low: what `ctxbench plan` reads, and how far it trusts it.

A 20-sample pilot is not exact: the plan is made over the pilot's interval and prints the range. A throughput
measured at 1K-2K is projected to longer lengths and says so. The plan counts samples as `score` plans them
(niah-grid: 30, not 6). A corrupt pilot store is one line naming the file, exit 2, never a traceback, "scores
near 500" or "~nan h". In process (the CLI's own main) where no process is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _pilot(path: Path, rows: list[dict]) -> Path:
    """A run directory as the store writes one: a record and a samples file (only the fields a plan reads)."""
    path.mkdir(parents=True)
    (path / "record.json").write_text(json.dumps({"run_id": path.name}))
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _rows(tasks: int, n: int, length: int, *, right: int, seconds: float = 0.5) -> list[dict]:
    return [{"id": f"t{t}@{length}#{i}", "task": f"t{t}", "length": length, "score": float(i < right),
             "seconds": seconds} for t in range(tasks) for i in range(n)]


def test_a_twenty_sample_pilot_is_planned_over_its_interval():
    """19/20 right on 13 tasks reads as 95, but the truth may be 88 (just above the threshold, where a length
    settles slowly): the plan's range must reach that truth's cost, not stop at the point estimate's."""
    from ctxbench.harness.core.config import load_suite
    from ctxbench.harness.run.plan_inputs import PilotRow, pilot_scores
    from ctxbench.leaderboard.sequential_plan import StopRule, build_plan, expected_rounds

    rows = [PilotRow(r["task"], r["length"], r["score"], None) for r in _rows(13, 20, 4096, right=19)]
    (score,) = pilot_scores(rows, [4096]).values()
    assert score.points == pytest.approx(95.0) and score.lo < 85.6 < score.hi < 100, score
    suite = load_suite("ruler")
    plan = build_plan(suite, cells={4096: [500] * 13}, seconds=None, expected={4096: (score.points, score.lo, score.hi)},
                      threshold=85.6, width=None, alpha=0.05, n=None, detect=None, power=0.8)
    (row,) = plan["targets"][0]["rows"]
    truth = expected_rounds(StopRule("effective-length", threshold=0.856, looks=1), 0.88, tasks=13, samples=500)
    assert row["samples_lo"] <= row["samples"] < truth.rounds * 13 <= row["samples_hi"], row
    assert row["samples_hi"] > 5 * row["samples"]  # the point estimate alone understates the cost several times


def test_the_pilot_range_is_printed(ctxbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("name: s\nlengths: [1024, 2048]\nsamples: 500\n"
                                     "tasks: [ruler/niah_single_1, ruler/niah_single_2]\n")
    pilot = _pilot(tmp_path / "pilot", _rows(2, 20, 1024, right=19) + _rows(2, 20, 2048, right=20))
    code, out, err = ctxbench("plan", "--suite", "s.yaml", "--pilot", str(pilot))
    assert code == 0, err
    assert "planned over their 95% intervals" in out and "over the pilot's intervals" in out, out
    line = next(x for x in out.splitlines() if x.startswith("│") and x.split("│")[1].strip() == "1K")
    assert "95.0 [" in line and "–" in line.split("│")[3], line  # the score's interval, and a range of samples


def test_a_throughput_from_short_lengths_is_marked_projected(ctxbench, tmp_path, monkeypatch):
    """A 1K/2K pilot (ruler-quick) planning ruler (4K-128K): every time is projected from 1K-2K, and says so."""
    monkeypatch.chdir(tmp_path)
    pilot = _pilot(tmp_path / "pilot", _rows(2, 5, 1024, right=5, seconds=1.0) + _rows(2, 5, 2048, right=5, seconds=2.0))
    code, out, err = ctxbench("plan", "--suite", "ruler", "--from", str(pilot))
    assert code == 0, err
    header = out.splitlines()[0]
    assert header.endswith("(projected from 1K–2K)"), header
    assert "times at 4K, 8K, 16K, 32K, 64K, 128K are projected from 1K–2K" in out
    code, out, err = ctxbench("plan", "--suite", "ruler", "--from", str(pilot), "--json")
    plan = json.loads(out)
    assert plan["measured_lengths"] == [1024, 2048] and plan["projected_lengths"][-1] == 131072
    # 2 s per sample at 2K, the same time per token at 128K: 64 x 2 s for each of 13 x 500 samples there
    assert plan["full_seconds"] > 13 * 500 * 128


def test_measured_lengths_are_not_marked(ctxbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pilot = _pilot(tmp_path / "pilot", _rows(2, 5, 1024, right=5) + _rows(2, 5, 2048, right=5))
    code, out, err = ctxbench("plan", "--suite", "ruler-quick", "--from", str(pilot))
    assert code == 0, err
    assert "projected" not in out


def test_niah_grid_is_counted_as_score_plans_it(ctxbench, data_dir, tmp_path, monkeypatch):
    """`score` plans niah-grid's depth x draw grid (30 samples); the plan counts through the same function."""
    import re

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(data_dir))
    code, out, err = ctxbench("score", "--backend", "echo", "--suite", "niah-grid")
    assert code == 0, err
    (scored,) = re.findall(r"plan: (\d+) samples", out + err)  # the line score prints before it builds a sample
    code, out, err = ctxbench("plan", "--suite", "niah-grid", "--json")
    assert code == 0, err
    assert json.loads(out)["full_samples"] == int(scored) == 30
    code, out, err = ctxbench("plan", "--suite", "niah-grid")
    assert "full protocol 30 samples" in out.splitlines()[0]


GOOD = {"id": "t0@1024#0", "task": "t0", "length": 1024, "score": 1.0, "seconds": 0.5}


@pytest.mark.parametrize("change,field", [
    ({"score": 5.0}, "score 5.0 is not a number in [0, 1]"),
    ({"score": "0.9"}, "score '0.9' is not a number in [0, 1]"),
    ({"score": True}, "score True is not a number in [0, 1]"),
    ({"seconds": float("nan")}, "seconds nan is not a finite time"),
    ({"seconds": -1}, "seconds -1 is not a finite time"),
    ({"length": "1k"}, "length '1k' is not a positive whole number"),
    ({"task": None}, "no task name"),
])
def test_a_corrupt_pilot_row_is_one_line_naming_the_file(ctxbench, tmp_path, monkeypatch, change, field):
    monkeypatch.chdir(tmp_path)
    pilot = _pilot(tmp_path / "pilot", [GOOD, {**GOOD, "id": "t0@1024#1", **change}])
    for flag in ("--pilot", "--from"):
        code, out, err = ctxbench("plan", "--suite", "ruler-quick", flag, str(pilot))
        assert code == 2, (out, err)
        (line,) = err.strip().splitlines()
        assert line.startswith(f"error: {flag}: {pilot / 'samples.jsonl'}: sample 't0@1024#1': {field}"), line
        assert "Traceback" not in err and "nan h" not in out


def test_a_line_that_is_not_a_row_is_refused(ctxbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pilot = _pilot(tmp_path / "pilot", [GOOD])
    with open(pilot / "samples.jsonl", "a") as f:
        f.write("[1, 2]\n{not json\n")
    code, out, err = ctxbench("plan", "--suite", "ruler-quick", "--pilot", str(pilot))
    assert code == 2
    assert err.strip() == (f"error: --pilot: {pilot / 'samples.jsonl'}:2: not a run row (the store is corrupt); "
                           "score the pilot again")
