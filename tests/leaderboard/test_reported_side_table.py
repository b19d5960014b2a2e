"""Issue 31 seam: after `board import hqa-table1`, the user's own models stay the main table and the paper's rows go
to a table of their own (reported), never the other way round."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd

from ctxbench.harness.core.config import resolve_config
from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord
from ctxbench.leaderboard.report import build_report
from ctxbench.leaderboard.store_frame import import_reported, load_store, reported_frame


def _my_model(root, label: str) -> None:
    store = RunStore(root, label)
    store.dir.mkdir(parents=True)
    rec = RunRecord(run_id=label, created="2026-01-01T00:00:00", suite="s", suite_config={}, model=label, backend="hf",
                    backend_args={}, tokenizer="", tokenizer_fingerprint="", template="", seed=42, truncation="refuse",
                    versions={}, command=[], label=label, model_fingerprint=f"dir:{label}",
                    plan={"ruler/niah_single_1": {"4096": 4, "8192": 4}})
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    store.append([{"id": f"ruler/niah_single_1@{n}#{i}", "task": "ruler/niah_single_1", "length": n, "index": i,
                   "score": 1.0, "prompt_hash": f"p{n}{i}"} for n in (4096, 8192) for i in range(4)])


def test_imported_paper_rows_sit_below_the_users_own_models(tmp_path):
    runs = tmp_path / "runs"
    _my_model(runs, "mine")
    import_reported(runs, resolve_config("hqa-table1", kind="reported", field="board import"))
    frames = load_store(runs)
    df = pd.concat([frames.scores, reported_frame(runs)], ignore_index=True)
    build_report(df, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50)
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    main = md.split("## Main results", 1)[1].split("\n## ", 1)[0]
    first, rest = main.split("| Model", 2)[1], "| Model".join(main.split("| Model", 2)[2:])
    assert "| mine |" in first and "Llama-3.1-8B-Instruct" not in first, main  # the user's model is the main table
    assert "Reported in publications" in main and "Llama-3.1-8B-Instruct" in rest
