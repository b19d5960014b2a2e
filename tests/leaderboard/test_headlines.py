"""Which numbers a board may put in its headline columns (issue 21 items 2 and 3), on small hand-made frames."""

from __future__ import annotations

import pandas as pd

from ctxbench.leaderboard.aggregate import length_averages
from ctxbench.leaderboard.frame import model_meta, normalise
from ctxbench.leaderboard.ranking import NO_THRESHOLD, comparison_groups, effective_length, weighted_averages
from ctxbench.leaderboard.tables import summary_frame

CELLS = ["model", "task", "length", "planned", "done", "errored", "pending", "errors"]


def scores(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["model", "task", "length", "index", "score"])


def test_a_model_with_an_incomplete_cell_has_no_headline():
    df = scores([("M", "ruler/t", 4096, 0, 1.0), ("M", "ruler/t", 4096, 1, 1.0), ("M", "ruler/t", 8192, 0, 1.0)])
    cells = pd.DataFrame([("M", "ruler/t", 4096, 2, 2, 0, 0, ""), ("M", "ruler/t", 8192, 2, 1, 0, 1, "")], columns=CELLS)
    avgs = length_averages(df, cells, n_boot=50)
    eff = effective_length(avgs, threshold=50).set_index("model")
    assert pd.isna(eff.loc["M", "effective_length"]) and eff.loc["M", "withheld"] == "incomplete"
    w = weighted_averages(avgs).set_index("model")
    assert pd.isna(w.loc["M", "avg"]) and not w.loc["M", "ranked"]
    done = cells.assign(done=2, pending=0)
    extra = scores([("M", "ruler/t", 8192, 1, 1.0)])  # a RULER task: an unknown one would have no threshold
    eff = effective_length(length_averages(pd.concat([df, extra]), done, n_boot=50), threshold=50)
    assert eff["effective_length"][0] == 8192 and eff["withheld"][0] == ""


def test_reported_per_task_rows_average_their_common_tasks_only():
    rep = pd.DataFrame({"model": "P", "task": ["easy", "easy", "hard"], "length": [4096, 8192, 4096],
                        "score": [1.0, 1.0, 0.2], "source": "reported"})
    avgs = length_averages(rep).set_index("length")
    assert avgs["mean"].tolist() == [1.0, 1.0] and set(avgs["n_tasks"]) == {1}


def test_no_effective_length_for_a_task_set_without_a_threshold_and_other_task_sets_are_set_apart():
    df = pd.concat([
        scores([("R1", "ruler/a", 4096, 0, 1.0), ("R2", "ruler/a", 4096, 0, 0.0)]),
        scores([("L", "longbench:qa", 4096, 0, 0.3), ("L", "longbench:sum", 4096, 0, 0.3)]),
    ])
    avgs = length_averages(df, n_boot=50)
    eff = effective_length(avgs, threshold=85.6).set_index("model")
    assert eff.loc["L", "withheld"] == NO_THRESHOLD and eff.loc["R1", "effective_length"] == 4096
    summary = summary_frame(avgs, eff.reset_index(), weighted_averages(avgs), model_meta(normalise(df)))
    assert comparison_groups(summary) == ({"R1", "R2"}, {"L"})
