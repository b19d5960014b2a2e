"""Issue 33, tasks/ by family: a store written before the move (tests/data/store_premove, five families scored by the
echo backend at 512 and 1K tokens with ctxbench 38bef45, when tasks/ was flat) builds the same board after it,
and every task name its rows hold still resolves."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

DATA = Path(__file__).parent / "data"
RUN_ID = "fam-fixture-adhoc-7da359d3"


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(DATA / "store_premove", store)
    return store


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_premove_store_builds_the_recorded_board(tmp_path, ctxbench):
    store = _store(tmp_path)
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"))
    assert code == 0, err
    assert _rows(tmp_path / "board" / "results.csv") == _rows(DATA / "store_premove_results.csv")


def test_premove_store_names_resolve_as_before():
    """Every task a stored row names builds from the registry under that name, and scores with the metric the row
    records (a run id also hashes task versions, which other changes bump: the rows, not the id, are checked here)."""
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.config import TaskSpec, build_task

    rows = [json.loads(line) for line in (DATA / "store_premove" / RUN_ID / "samples.jsonl").read_text().splitlines()]
    stored = {(r["task"], r["metric"]) for r in rows}
    assert len({task.split("/")[0] for task, _ in stored}) == 5
    for task, metric in sorted(stored):
        assert build_task(TaskSpec(task=task)).name == task
        assert metric in registry.names("metric"), metric
