"""Issue 36, `ctxbench board build --format json`: one file, board.json, under the versioned schema
ctxbench-board/1, every field documented in docs/publishing.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ctxbench.leaderboard.board_json import FIELDS, SCHEMA, TOP_FIELDS

from .test_reported_side_table import _my_model

DOCS = Path(__file__).resolve().parents[2] / "docs" / "publishing.md"


def test_format_json_writes_only_board_json_with_the_schema(tmp_path, ctxbench):
    runs = tmp_path / "runs"
    _my_model(runs, "mine")
    _my_model(runs, "other")
    (tmp_path / "paper.csv").write_text("model,task,length,score\nMine,avg,4K,95\n")
    assert ctxbench("board", "import", str(tmp_path / "paper.csv"), "--store", str(runs))[0] == 0
    code, out, err = ctxbench("board", "build", "--store", str(runs), "--out", str(tmp_path / "b"), "--format", "json",
                              "--compare", "mine:other")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["board.json"]
    assert out.strip() == f"wrote {tmp_path / 'b' / 'board.json'}"
    doc = json.loads((tmp_path / "b" / "board.json").read_text())
    assert doc["schema"] == SCHEMA == "ctxbench-board/1"
    assert list(doc) == list(TOP_FIELDS)
    for name, (_, fields) in FIELDS.items():
        assert all(list(row) == list(fields) for row in doc[name]), name
    cell = next(c for c in doc["cells"] if c["model"] == "mine" and c["length"] == 4096)
    assert cell["score"] == 100.0 and cell["n"] == 4 and round(cell["lo"], 1) == 39.8
    assert doc["comparisons"][0]["n_pairs"] == 8 and doc["comparisons"][0]["n_only_a"] == 0
    assert doc["claimed"][0]["verdict"] == "inside the interval"
    assert doc["repeats"] == []  # no --repeats run on this board (tests/leaderboard/test_repeats.py has one)


def test_bad_format_is_one_line_and_writes_nothing(tmp_path, ctxbench):
    runs = tmp_path / "runs"
    _my_model(runs, "mine")
    code, out, err = ctxbench("board", "build", "--store", str(runs), "--out", str(tmp_path / "b"), "--format", "xml")
    assert code == 2 and "--format: 'xml' is not one of board, json" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_every_field_is_documented():
    text = DOCS.read_text()
    documented = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, flags=re.M))
    wanted = set(TOP_FIELDS) | {f for _, fields in FIELDS.values() for f in fields}
    assert wanted <= documented, sorted(wanted - documented)
