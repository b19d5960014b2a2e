"""Issue 36, common items: two models scored on different subsets (another N, a failed sample) are compared on the
items both have: the paired test pairs only those, and the board says how many, per length, with each model's score
on the common items beside its score on all of its own."""

from __future__ import annotations

import dataclasses
import json

from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord
from ctxbench.leaderboard.common_items import common_items
from ctxbench.leaderboard.report import build_report
from ctxbench.leaderboard.store_frame import load_store

TASK = "ruler/niah_single_1"


def _model(root, label: str, n: int, scores: dict[tuple[int, int], float | None]) -> None:
    """A run planned for n samples per length; `scores` holds the rows it has (None: that sample failed)."""
    store = RunStore(root, label)
    store.dir.mkdir(parents=True)
    rec = RunRecord(run_id=label, created="2026-01-01T00:00:00", suite="s", suite_config={}, model=label, backend="hf",
                    backend_args={}, tokenizer="", tokenizer_fingerprint="", template="", seed=42, truncation="refuse",
                    versions={}, command=[], label=label, model_fingerprint=f"dir:{label}",
                    plan={TASK: {"4096": n, "8192": n}})
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    store.append([{"id": f"{TASK}@{length}#{i}", "task": TASK, "length": length, "index": i, "prompt_hash": f"p{length}{i}",
                   **({"score": s} if s is not None else {"score": None, "error": "HTTP 500"})}
                  for (length, i), s in scores.items()])


def _store(tmp_path):
    runs = tmp_path / "runs"
    # a: 8 samples per length, right on every even index; b: the first 4 at 4K (another N), 8 at 8K but #3 failed
    _model(runs, "a", 8, {(length, i): float(i % 2 == 0) for length in (4096, 8192) for i in range(8)})
    b = {(4096, i): 1.0 for i in range(4)} | {(8192, i): (None if i == 3 else 1.0) for i in range(8)}
    _model(runs, "b", 8, b)
    return load_store(runs)


def test_comparison_uses_the_items_both_have_and_says_how_many(tmp_path):
    frames = _store(tmp_path)
    build_report(frames.scores, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50,
                 comparisons=[("a", "b")])
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    section = md.split("## Common items: a vs b", 1)[1].split("\n## ", 1)[0]
    assert "| 4K | 4 | 4 | 0 | 50.0 | 100.0 | 50.0 | 100.0 |" in section
    assert "| 8K | 7 | 1 | 0 | 57.1 | 100.0 | 50.0 | 100.0 |" in section  # b's failed #3 (odd: a got it wrong) is out
    assert "| all | 11 | 5 | 0 |" in section
    assert "uses the 11 items both models scored" in section
    results = json.loads((tmp_path / "board" / "results.json").read_text())["comparisons"][0]
    assert (results["n_pairs"], results["n_unmatched_a"], results["n_unmatched_b"]) == (11, 5, 0)
    assert md.index("## Paired comparison: a vs b") < md.index("## Common items: a vs b")


def test_common_items_frame_counts_each_side(tmp_path):
    frames = _store(tmp_path)
    frame = common_items(frames.scores, "b", "a")
    overall = frame.iloc[-1]
    assert (overall.common, overall.only_a, overall.only_b) == (11, 0, 5)
    assert round(overall.a_common, 6) == 1.0 and round(overall.b_all, 6) == 0.5
