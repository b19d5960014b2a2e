"""Issue 33, tasks/ by family: a store written before the move (tests/data/store_premove, five families scored by the
echo backend at 512 and 1K tokens with ctxbench 38bef45, when tasks/ was flat) builds the same board after it, and
rerunning its command resumes the same run: every stored task name still resolves, with the same version."""

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


def test_premove_store_resumes_as_the_same_run(tmp_path, ctxbench, monkeypatch, data_dir):
    """The stored command, rerun: the same run id (names, versions and arguments hash as before), nothing rescored.
    niah/single's haystack (pg_essays) comes from the shared data dir."""
    store = _store(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(data_dir))
    record = json.loads((store / RUN_ID / "record.json").read_text())
    before = (store / RUN_ID / "samples.jsonl").read_bytes()
    code, out, err = ctxbench(*record["command"][1:])
    assert code == 0, err
    assert sorted(p.name for p in store.iterdir()) == [RUN_ID]
    assert (store / RUN_ID / "samples.jsonl").read_bytes() == before
