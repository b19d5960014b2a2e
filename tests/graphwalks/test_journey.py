"""GraphWalks end to end: `ctxbench score --backend echo --model smollm2-135m --suite graphwalks-quick` over the
fixture (the shipped suite, the CLI's own main() in this process) writes its rows and prints the table; `ctxbench
tasks` lists both tasks with their arguments; a bad grader is one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"


def test_quick_suite_end_to_end(ctxbench, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    store = tmp_path / "runs"
    code, out, err = ctxbench("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "graphwalks-quick",
                              "--data-dir", str(DATA), "--store", str(store))
    assert code == 0, err
    assert "graphwalks/bfs" in out and "graphwalks/parents" in out and "8K" in out
    record = json.loads(next(store.rglob("record.json")).read_text())
    # under the chat template the fixture's items take 3068-11872 (bfs) and 2632-12126 (parents) tokens with the answer
    assert record["plan"]["graphwalks/bfs"] == {"2048": 0, "4096": 1, "8192": 2}
    assert record["plan"]["graphwalks/parents"] == {"2048": 0, "4096": 2, "8192": 2}
    rows = [json.loads(line) for f in store.rglob("samples.jsonl") for line in f.read_text().splitlines()]
    assert len(rows) == 7 and {r["task"] for r in rows} == {"graphwalks/bfs", "graphwalks/parents"}
    # echo answers with the prompt's end, the format line "Final Answer: [node1, node2, node3]": no gold node, so 0
    assert all(r["score"] == 0.0 and r["prompt_tokens"] + 1024 <= r["length"] and r.get("cluster") is None for r in rows)


def test_tasks_lists_both_with_their_arguments(ctxbench):
    code, out, _ = ctxbench("tasks")
    assert code == 0 and "graphwalks/bfs" in out and "graphwalks/parents" in out
    code, out, _ = ctxbench("tasks", "graphwalks/bfs")
    assert code == 0
    for arg in ("data_path", "revision", "grader", "limit", "max_new_tokens", "lmeval-flexible"):
        assert arg in out


def test_bad_grader_is_one_line_and_nothing_written(ctxbench, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: gw\nlengths: [4096]\nsamples: 1\ntasks:\n  - {task: graphwalks/bfs, args: {grader: exact}}\n")
    code, _, err = ctxbench("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", str(suite),
                            "--data-dir", str(DATA), "--store", str(tmp_path / "runs"))
    assert code == 2 and "grader" in err and len([x for x in err.splitlines() if x.strip()]) == 1, err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.jsonl"))
