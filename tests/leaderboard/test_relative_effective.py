"""NoLiMa's relative effective length: the longest length scoring at least X% of the model's own shortest-length
score, beside RULER's absolute one on the board when asked for."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ctxbench.leaderboard.ranking import relative_effective_length


def _avgs(rows):
    return pd.DataFrame(rows, columns=["model", "length", "mean", "headline"])


def test_relative_to_the_models_own_shortest_score():
    avgs = _avgs([("M", 1000, 0.60, ""), ("M", 2000, 0.51, ""), ("M", 4000, 0.50, ""), ("M", 8000, 0.52, ""),
                  ("W", 1000, 0.90, ""), ("W", 2000, 0.10, "")])
    got = relative_effective_length(avgs, percent=85).set_index("model")
    # 85% of 0.60 = 0.51: "at least", so 2000 passes (equal); 4000 fails; rule max counts 8000 after the dip
    assert got.loc["M", "relative_effective_length"] == 8000 and got.loc["M", "relative_base"] == 0.60
    assert got.loc["W", "relative_effective_length"] == 1000
    contiguous = relative_effective_length(avgs, percent=85, rule="contiguous").set_index("model")
    assert contiguous.loc["M", "relative_effective_length"] == 2000


def test_withheld_when_incomplete_or_base_zero():
    avgs = _avgs([("I", 1000, 0.9, "1 cell incomplete"), ("Z", 1000, 0.0, ""), ("Z", 2000, 0.0, "")])
    got = relative_effective_length(avgs, percent=85).set_index("model")
    assert got.loc["I", "relative_withheld"] == "1 cell incomplete" and pd.isna(got.loc["I", "relative_effective_length"])
    assert got.loc["Z", "relative_withheld"] == "score 0 at the shortest length"
    with pytest.raises(ValueError, match="percentage"):
        relative_effective_length(avgs, percent=0)


def test_board_shows_it_beside_the_absolute_one(ctxbench, tmp_path):
    paper = tmp_path / "paper.csv"
    paper.write_text("model,task,length,score\n" + "".join(f"P,avg,{n},{s}\n" for n, s in
                                                          ((1024, 90), (2048, 80), (4096, 75), (8192, 60))))
    store, board = tmp_path / "runs", tmp_path / "board"
    assert ctxbench("board", "import", str(paper), "--store", str(store))[0] == 0
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(board), "--relative-effective", "150")
    assert code == 2 and "--relative-effective: 150 is not a percentage" in err and not board.exists()
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(board), "--relative-effective", "85")
    assert code == 0, err
    md = (board / "leaderboard.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Model"))
    row = next(line for line in md.splitlines() if line.startswith("| P"))
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["Effective"] == "1K" and cells["Effective (relative)"] == "2K"  # 85.6 absolute; 85% of 90 = 76.5
    assert "at least 85% of the model's own score" in md
    results = json.loads((board / "results.json").read_text())
    assert results["relative_effective_percent"] == 85
    plain = tmp_path / "plain"
    assert ctxbench("board", "build", "--store", str(store), "--out", str(plain))[0] == 0
    assert "Effective (relative)" not in (plain / "leaderboard.md").read_text()


def test_families_with_their_own_scale_get_no_absolute_threshold_but_a_relative_one():
    from ctxbench.leaderboard.ranking import has_threshold

    assert not any(has_threshold(t) for t in ("babilong/qa1", "helmet/rag_nq", "nolima/needles,ruler/vt"))
    avgs = _avgs([("N", 512, 0.9, ""), ("N", 1024, 0.8, "")]).assign(task_set_key="nolima/needles")
    assert relative_effective_length(avgs, percent=85).loc[0, "relative_effective_length"] == 1024
