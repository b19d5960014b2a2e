"""Tables 1-3 of the hierarchical-QA paper (configs/reported/hqa-table{1,2,3}.csv) import with `ctxbench board import`,
so a GPU run of hqa-paper sits beside the published numbers (issue 13 §8). The averages the paper prints come out
of the board's own aggregation, and MMLU lands in the short-context section, off the length axis."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ctxbench.harness.core.config import CONFIG_ROOT
from ctxbench.leaderboard.aggregate import length_averages
from ctxbench.leaderboard.reported import import_reported_csv
from ctxbench.leaderboard.store_frame import reported_frame
from ctxbench.tasks.infinitebench.task import SPEC as INFINITEBENCH

TABLES = [CONFIG_ROOT / "reported" / f"hqa-table{i}.csv" for i in (1, 2, 3)]
# Table 1's printed "Average" row (InfiniteBench, 8 tasks), per model as the CSV names them
TABLE1_AVERAGE = {"Llama-3.1-8B-Instruct": 51.31, "Llama-3-8B-Instruct-Gradient-1048k": 41.04,
                  "Llama-3.1-8B-Instruct + hqa_sft 180K": 59.45, "Llama-3.1-8B-Instruct + hqa_sft 350K": 59.26,
                  "Llama-3.1-8B-Instruct + hqa_sft 650K": 56.51, "Llama-3.1-8B-Instruct + hqa_sft 1M": 54.80}


def board(*args: str) -> str:
    """`ctxbench board ARGS` in-process; its output (exit status 0 asserted)."""
    from typer.testing import CliRunner

    from ctxbench.harness.cli import app

    res = CliRunner().invoke(app, ["board", *args])
    assert res.exit_code == 0, res.output
    return res.output


def test_table1_averages_as_printed(tmp_path):
    board("import", str(TABLES[0]), "--store", str(tmp_path / "runs"))
    rows = import_reported_csv(TABLES[0])
    assert set(rows["task"]) == {f"infinitebench/{t}" for t in ("passkey", "number_string", "kv_retrieval", "longbook_sum_eng",
                                                                "longbook_qa_eng", "longbook_choice_eng", "longdialogue_qa_eng", "math_find")}
    assert all(rows["category"] == [INFINITEBENCH[t.split("/")[1]][1] for t in rows["task"]])
    means = length_averages(reported_frame(tmp_path / "runs")).set_index("model")["mean"]
    assert set(means.index) == set(TABLE1_AVERAGE)
    for model, printed in TABLE1_AVERAGE.items():
        assert means[model] * 100 == pytest.approx(printed, abs=0.01), model  # printed to 2 decimals (41.0475 -> 41.04)


def test_all_three_tables_build_one_board_with_mmlu_off_the_length_axis(tmp_path):
    for csv in TABLES:
        assert f"imported {len(import_reported_csv(csv))} reported rows" in board("import", str(csv), "--store", str(tmp_path / "runs"))
    board("build", "--store", str(tmp_path / "runs"), "--out", str(tmp_path / "board"))
    short = import_reported_csv(TABLES[2])
    assert set(short["length"]) == {0}
    # every MMLU category row of Table 3 is a category mean on the board, with the printed value
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    section = md.split("## Short-context tasks")[1].split("\n## ")[0]
    for r in short.dropna(subset=["category"]).itertuples():
        assert f"| {r.model.replace('_', chr(92) + '_')} | {r.category} | {100 * r.score:.1f} |" in section, (r.model, r.category)
    # the lengths are 128K only, each the mean of that model's InfiniteBench and LongBench rows: MMLU (length 0)
    # never enters a length score
    data = json.loads((tmp_path / "board" / "results.json").read_text())
    long_rows = pd.concat([import_reported_csv(t) for t in TABLES[:2]])
    expected = long_rows.groupby("model")["score"].mean() * 100
    assert {r["length"] for r in data["lengths"]} == {131072}
    assert {r["model"]: round(r["mean"], 4) for r in data["lengths"]} == {m: round(v, 4) for m, v in expected.items()}
    categories = data["short_context"]["categories"]
    assert {(c["model"], c["category"], round(c["mean"], 2)) for c in categories} == \
        {(r.model, r.category, round(100 * r.score, 2)) for r in short.dropna(subset=["category"]).itertuples()}


def test_short_length_spellings(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("model,task,length,score\nM,lmeval/mmlu,short,60\nN,lmeval/mmlu,0,61\n")
    assert list(import_reported_csv(path)["length"]) == [0, 0]
    path.write_text("model,task,length,claimed_length,score\nM,lmeval/mmlu,0,0,60\n")
    with pytest.raises(ValueError, match="column 'claimed_length' must be an integer"):
        import_reported_csv(path)

