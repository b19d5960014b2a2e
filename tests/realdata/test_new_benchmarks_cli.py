"""BABILong, HELMET re-rank and NoLiMa through `ctxbench score` (echo backend, hand-written files in the official
layouts under --data-dir), then the board with the relative effective length; a HELMET length below 8K is refused
before anything is written."""

from __future__ import annotations

import json


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _rerank(qid, labels):
    return {"qid": qid, "query": f"query {qid}", "ctxs": [{"id": str(i), "text": f"Passage {i}.", "label": lab}
                                                          for i, lab in enumerate(labels)]}


def _data(root):
    item = {"input": "Mary went to the garden. " + "Filler text here. " * 20, "question": "Where is Mary?", "target": "garden"}
    for split in ("0k", "1k"):
        _write(root / "babilong" / split / "qa1.jsonl", "\n".join(json.dumps(item) for _ in range(2)))
    marco = root / "helmet" / "data" / "msmarco"
    _write(marco / "test_reranking_data_k50_dep3.jsonl", "\n".join(json.dumps(_rerank(q, [0, 2, 1])) for q in "ab"))
    _write(marco / "test_reranking_data_k10_dep3.jsonl", "\n".join(json.dumps(_rerank(q, [1, 0])) for q in "cde"))
    entry = {"id": "0401", "needle": "{CHAR} lives next to the {1}.", "questions": {"onehop": "Who has been to Dresden?"},
             "character_set": ["Yuki", "Katie"], "tests": {"T01": {"input_args": ["Semper Opera House"]}}}
    _write(root / "nolima" / "needlesets" / "needle_set.json", json.dumps([entry]))
    _write(root / "nolima" / "haystack" / "rand_shuffle" / "rand_book_1.txt", "The river ran past the hills. " * 300)


SUITE = """name: new-benchmarks
lengths: [512, 1024]
samples: 2
tasks:
  - babilong/qa1
  - {task: helmet/rerank_msmarco, args: {k: 50, limit: 2}}
  - {task: nolima/needles, args: {books: [1], depths: 2, tokens_to_generate: 16}}
"""


def test_score_board_and_refusal(ctxbench, tmp_path):
    data, store = tmp_path / "data", tmp_path / "runs"
    _data(data)
    _write(tmp_path / "suite.yaml", SUITE)
    code, _, err = ctxbench("score", "--suite", str(tmp_path / "suite.yaml"), "--backend", "echo", "--data-dir", str(data),
                            "--store", str(store))
    assert code == 0, err
    rows = [json.loads(line) for f in store.rglob("*.jsonl") for line in f.read_text().splitlines() if '"task"' in line]
    tasks = {r["task"] for r in rows if r.get("score") is not None}
    assert {"babilong/qa1", "helmet/rerank_msmarco", "nolima/needles"} <= tasks
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"), "--relative-effective", "85")
    assert code == 0, err
    assert "Effective (relative)" in (tmp_path / "board" / "leaderboard.md").read_text()
    _write(tmp_path / "bad.yaml", "name: bad\nlengths: [4096]\nsamples: 2\ntasks:\n  - helmet/rerank_msmarco\n")
    code, _, err = ctxbench("score", "--suite", str(tmp_path / "bad.yaml"), "--backend", "echo", "--data-dir", str(data),
                            "--store", str(tmp_path / "runs2"))
    assert code == 2 and "starts at 8192 tokens" in err and not (tmp_path / "runs2").exists()
