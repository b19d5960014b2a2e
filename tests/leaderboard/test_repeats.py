"""Issue 36, repeats: with --repeats k the board shows each repeat's score and their spread beside the interval,
while n still counts distinct samples (the repeats are averaged per sample before any statistic)."""

from __future__ import annotations

import dataclasses
import json

from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord, repeat_id
from ctxbench.leaderboard.board_json import board_document
from ctxbench.leaderboard.report import build_report
from ctxbench.leaderboard.store_frame import load_store

TASK = "ruler/niah_single_1"
# sample i, repeat r -> 0/1: repeat 0 gets 4 of 6 right, repeat 1 gets 3, repeat 2 gets 5 (spread 2/6 = 33.3 points)
RIGHT = {0: {0, 1, 2, 3}, 1: {0, 1, 2}, 2: {0, 1, 2, 3, 4}}


def _run(root) -> None:
    store = RunStore(root, "m")
    store.dir.mkdir(parents=True)
    rec = RunRecord(run_id="m", created="2026-01-01T00:00:00", suite="s", suite_config={}, model="m", backend="hf",
                    backend_args={}, tokenizer="", tokenizer_fingerprint="", template="", seed=42, truncation="refuse",
                    versions={}, command=[], label="m", model_fingerprint="dir:m", plan={TASK: {"4096": 6}})
    body = dataclasses.asdict(rec)
    body["generation"] = {"repeats": 3, "gen_kwargs": {"temperature": 0.7}}
    store.record_path.write_text(json.dumps(body))
    store.append([{"id": repeat_id(f"{TASK}@4096#{i}", r), "task": TASK, "length": 4096, "index": i, "repeat": r,
                   "prompt_hash": f"p{i}", "score": float(i in RIGHT[r])} for i in range(6) for r in range(3)])


def test_per_repeat_scores_and_spread_beside_the_interval(tmp_path):
    _run(tmp_path / "runs")
    frames = load_store(tmp_path / "runs")
    assert len(frames.scores) == 6  # six distinct samples, not 18 rows
    build_report(frames.scores, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50)
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    section = md.split("## Repeats", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if "niah" in line)
    assert "| 4K | 66.7 " in row and "(n=6) | 66.7, 50.0, 83.3 | 33.3 |" in row, row
    rec = json.loads((tmp_path / "board" / "results.json").read_text())["repeats"]
    assert rec[0]["repeats"] == 3 and rec[0]["n"] == 6 and [round(v, 1) for v in rec[0]["per_repeat"]] == [66.7, 50.0, 83.3]
    doc = board_document(json.loads((tmp_path / "board" / "results.json").read_text()))
    assert doc["repeats"][0]["repeats"] == 3 and round(doc["repeats"][0]["spread"], 1) == 33.3


def test_no_repeats_no_section(tmp_path):
    from .test_reported_side_table import _my_model

    _my_model(tmp_path / "runs", "mine")
    frames = load_store(tmp_path / "runs")
    build_report(frames.scores, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50)
    assert "## Repeats" not in (tmp_path / "board" / "leaderboard.md").read_text()
