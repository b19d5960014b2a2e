"""One typed row (issue 23): every writer builds a Row, RunStore writes and reads it in one place, and rows written
by older versions (4eafb19's, the schema-2 fixture) read with every field of today's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxbench.harness.core.rows import FIELDS, Row
from ctxbench.harness.core.store import RunStore

SCHEMA2 = Path(__file__).parent / "journeys" / "data" / "schema2-store"  # rows as 4eafb19 wrote them


def test_rows_from_4eafb19_read_with_every_field(tmp_path):
    shutil.copytree(SCHEMA2, tmp_path / "runs")
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    raw = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert "cluster" not in raw[0]  # the old format
    rows = list(RunStore(tmp_path / "runs", run.name).rows())
    assert len(rows) == len(raw)
    for old, new in zip(raw, rows):
        assert {f.name for f in FIELDS} <= set(new) and new["cluster"] is None
        assert {k: new[k] for k in old} == old  # nothing the old row said is lost or changed


def test_a_row_is_written_and_read_back_whole(tmp_path):
    row = Row(id="t@512#0", task="t", length=512, index=0, metric="m", score=1.0, answers=("a",), depths=(50.0,),
              cluster="doc-1", meta={"k": 1}, extra={"timing": "exact", "repeat": 2})
    store = RunStore(tmp_path, "run")
    store.dir.mkdir()
    store.append([row])
    (back,) = store.rows()
    assert back == row.to_json() and Row.from_json(back) == row
    assert back["timing"] == "exact" and back["answers"] == ["a"]


def test_a_mode_field_cannot_shadow_a_common_one():
    with pytest.raises(ValueError, match="shadow"):
        Row(id="x", task="t", length=1, index=0, extra={"score": 1.0}).to_json()


def test_a_row_without_its_identity_is_refused():
    with pytest.raises(ValueError, match="missing task"):
        Row.from_json({"id": "x", "length": 1, "index": 0})
