"""Labels (issue 32, Low): two labels whose slugs collide (all-CJK labels, labels equal in their first 40 slug
characters) never share a run, an ASCII label keeps the run id it always had, and a label's escape codes never
reach the terminal or the board (leaderboard.md, index.html, results.csv). The journey runs in process
(`user_in_process`)."""

from __future__ import annotations

import json
from pathlib import Path

from ctxbench.harness.core.config import adhoc_suite
from ctxbench.harness.core.redact import printable
from ctxbench.harness.run.planning import RunPlan


def plan(tmp: Path, label: str) -> RunPlan:
    return RunPlan(adhoc_suite("ruler/niah_single_1", samples=2, lengths=[512]), "smollm2-135m", "echo", {}, tmp,
                   label=label)


def test_colliding_slugs_get_distinct_run_ids(tmp_path):
    long_a, long_b = "x" * 40 + "-model-a", "x" * 40 + "-model-b"
    ids = {label: plan(tmp_path, label).run_id() for label in ("模型甲", "模型乙", long_a, long_b, "a b", "a_b")}
    assert len(set(ids.values())) == len(ids), ids


def test_an_ascii_label_keeps_its_run_id(tmp_path):
    """The id an ASCII label's run had before labels were hashed (computed by ctxbench 5a9a980): old stores resume."""
    assert plan(tmp_path, "my-model").run_id() == "my-model-adhoc-02b8e36c"
    assert plan(tmp_path, "").run_id() == "smollm2-135m-adhoc-02b8e36c"


def test_a_lossy_label_scored_under_the_older_id_is_resumed(tmp_path):
    older = tmp_path / "x-adhoc-02b8e36c"  # the id of label 模型甲 before its hash held the label
    older.mkdir()
    (older / "record.json").write_text(json.dumps({"label": "模型甲"}))
    assert plan(tmp_path, "模型甲").run_id() == older.name
    assert plan(tmp_path, "模型乙").run_id() != older.name  # another label's run is not this one


def test_printable_escapes_controls_and_keeps_text():
    assert printable("a\x1b[2J\x07b 模型 \u202e\n") == "a\\x1b[2J\\x07b 模型 \\u202e\\n"
    assert printable("line\nnext\tx\x1b", keep_lines=True) == "line\nnext\tx\\x1b"


def test_two_cjk_labels_reach_the_board_and_escape_codes_are_shown_as_text(user_in_process):
    base = "ctxbench score --backend echo --tasks ruler/niah_single_1 --lengths 512 --samples 2 --store runs --label"
    for label in ("模型甲", "模型乙", "evil\x1b]0;pwned\x07\x1b[2J"):
        r = user_in_process.run([*base.split(), label])
        assert r.code == 0, r.err[-2000:]
        assert "\x1b]0;" not in r.out + r.err and "\x07" not in r.out + r.err
    assert len(list((user_in_process.cwd / "runs").glob("*/record.json"))) == 3
    board = user_in_process.run("ctxbench board build --store runs --out board")
    assert board.code == 0, board.err[-2000:]
    assert "\x1b" not in board.out + board.err
    for name in ("leaderboard.md", "index.html", "results.csv"):
        text = (user_in_process.cwd / "board" / name).read_text(encoding="utf-8")
        assert "模型甲" in text and "模型乙" in text, name
        assert "\x1b" not in text and "\x07" not in text, name
        assert "pwned" in text and "x1b" in text, name  # shown as text (leaderboard.md escapes it for markdown too)


def test_an_imported_table_cannot_carry_escape_codes_onto_the_board(tmp_path):
    from ctxbench.leaderboard.store_frame import REPORTED_DIR, reported_frame

    (tmp_path / REPORTED_DIR).mkdir()
    (tmp_path / REPORTED_DIR / "paper.csv").write_text("model,task,length,score\n\"evil\x1b[2Jmodel\",avg,4096,50\n")
    frame = reported_frame(tmp_path)
    assert list(frame["model"]) == ["evil\\x1b[2Jmodel"]
