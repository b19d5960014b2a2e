"""LOGO's Table 1 (LongBench by category, configs/reported/logo-table1.csv) ships and imports with `ctxbench board import`,
so a GPU run on logo-paper sits beside the published numbers (issue 14 §9)."""

from __future__ import annotations

import pytest

from ctxbench.harness.core.config import CONFIG_ROOT
from ctxbench.leaderboard.aggregate import length_averages
from ctxbench.leaderboard.reported import import_reported_csv
from ctxbench.leaderboard.store_frame import REPORTED_DIR, reported_frame
from ctxbench.tasks.longbench.task import SPEC

CSV = CONFIG_ROOT / "reported" / "logo-table1.csv"


def test_table1_imports_on_the_command_line_and_averages_as_printed(tmp_path):
    from typer.testing import CliRunner

    from ctxbench.harness.cli import app

    res = CliRunner().invoke(app, ["board", "import", str(CSV), "--store", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    rows = import_reported_csv(CSV)
    assert f"imported {len(rows)} reported rows" in res.output
    kept = list((tmp_path / "runs" / REPORTED_DIR).glob(f"{CSV.stem}-*.csv"))  # keyed by content, not by name
    assert len(kept) == 1 and kept[0].read_bytes() == CSV.read_bytes()
    # every model has the five categories the paper reports: LongBench's own, code excluded
    categories = {cat for _, _, cat in SPEC.values()} - {"code"}
    assert set(rows["category"]) == categories and (rows.groupby("model")["category"].nunique() == len(categories)).all()
    # the board's average of a reported model is the mean of its categories; where Table 1 prints the average in full
    # (and where the text quotes it: LongAlpaca's 42.8, §5.2) it must come out the same
    means = length_averages(reported_frame(tmp_path / "runs")).set_index("model")["mean"]
    printed = {"Llama-3.1-8B-Instruct-128K": 39.2, "Llama-2-7B-Chat-4K + LOGO-32K": 30.1,
               "Llama-3-8B-Instruct-80K + LongAlpaca": 42.8}
    for model, avg in printed.items():
        assert means[model] * 100 == pytest.approx(avg, abs=0.05), model
