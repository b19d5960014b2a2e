"""The LongBench Pro journey: `ctxbench score --backend echo --model smollm2-135m --suite longbenchpro-quick` on the
hand-made fixture: every task of the quick suite scored at the official 8k and 16k levels, rows written with their
document clusters, the table printed, and --until refused (questions share documents). No network."""

from __future__ import annotations

import json
from pathlib import Path

from ctxbench.tasks.longbenchpro.catalog import TASKS

FIXTURE = Path(__file__).parent / "data"


def test_quick_suite_scores_end_to_end(ctxbench, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    store = tmp_path / "runs"
    score = ("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "longbenchpro-quick",
             "--data-dir", str(FIXTURE), "--store", str(store))
    code, _, err = ctxbench(*score, "--until", "effective-length")
    assert code == 2 and "--until: longbenchpro/" in err and "share a haystack, document" in err and not store.exists()

    code, out, err = ctxbench(*score)
    assert code == 0, err
    rows = [json.loads(x) for x in next(store.rglob("samples.jsonl")).read_text().splitlines()]
    quick = {t.task_name for t in TASKS if t.metric != "Summary"}
    assert len(quick) == 23 and {r["task"] for r in rows} == quick
    assert len(rows) == 23 * 3  # two 8k items and one 16k item a task
    assert {r["length"] for r in rows} == {8192, 16384}
    assert all(r["error"] is None and 0.0 <= r["score"] <= 1.0 for r in rows)
    by_task = {}
    for r in rows:
        by_task.setdefault(r["task"], {}).setdefault(r["length"], set()).add(r["cluster"])
    assert all(len(c[8192]) == 1 and c[8192] != c[16384] for c in by_task.values())  # the 8k pair shares its document
    assert "longbenchpro/global-cohesive-retrieval" in out and "average" in out
