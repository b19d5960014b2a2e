"""`ctxbench score --suite oolong-quick` end to end on the echo backend over the hand-made fixture: the plan counts
each bin's windows' questions, rows carry the window as their cluster and the official parse, the table prints;
`--until` refuses Oolong (a window's questions are not independent) before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURE = Path(__file__).parent / "data"


def run(ctxbench, tmp_path, *extra):
    return ctxbench("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "oolong-quick", "--data-dir",
                    str(FIXTURE), "--store", str(tmp_path / "runs"), *extra)


def test_oolong_quick_scores_end_to_end(ctxbench, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    code, out, err = run(ctxbench, tmp_path)
    assert code == 0, err
    assert "oolong/synth" in out and "oolong/real" in out
    record = json.loads(next((tmp_path / "runs").rglob("record.json")).read_text())
    assert record["plan"]["oolong/synth"] == {"1024": 5, "2048": 5, "4096": 5}
    assert record["plan"]["oolong/real"] == {"1024": 3, "2048": 3, "4096": 0}
    rows = [json.loads(line) for line in next((tmp_path / "runs").rglob("samples.jsonl")).read_text().splitlines()]
    assert len(rows) == 21 and all(r["score"] is not None for r in rows)
    assert {r["cluster"] for r in rows if r["task"] == "oolong/synth"} == {"oolong/synth:101", "oolong/synth:102", "oolong/synth:103"}
    assert all(set(r["parse"]) == {"answer", "confidence"} for r in rows)  # the official parser's reading, per row
    assert all(r["prompt_tokens"] + r["max_new_tokens"] <= r["length"] for r in rows)


def test_until_refuses_oolong_before_writing(ctxbench, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    code, _, err = run(ctxbench, tmp_path, "--until", "effective-length")
    assert code == 2 and "share a haystack, document or demonstrations" in err and "oolong/" in err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("samples.jsonl"))
