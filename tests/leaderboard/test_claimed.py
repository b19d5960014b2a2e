"""Issue 36, claimed against measured: a published row of a model also scored here sits beside the measurement, with
the difference and whether it lies inside the measured interval; a published-only row reads 'reported, not
reproduced'."""

from __future__ import annotations

import json

import pandas as pd

from ctxbench.leaderboard.claimed import NOT_REPRODUCED, name_key, verdict
from ctxbench.leaderboard.report import build_report
from ctxbench.leaderboard.store_frame import import_reported, load_store, reported_frame

from .test_reported_side_table import _my_model


def _board(tmp_path, published: str) -> tuple[str, list[dict]]:
    runs = tmp_path / "runs"
    _my_model(runs, "mine")  # 4 of 4 right at 4K and 8K: Clopper-Pearson [39.8, 100]
    (tmp_path / "paper.csv").write_text(published)
    import_reported(runs, tmp_path / "paper.csv")
    frames = load_store(runs)
    df = pd.concat([frames.scores, reported_frame(runs)], ignore_index=True)
    build_report(df, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50)
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    return md, json.loads((tmp_path / "board" / "results.json").read_text())["claimed"]


def test_published_and_measured_side_by_side_with_difference_and_verdict(tmp_path):
    md, claimed = _board(tmp_path, "model,task,length,score\norg/Mine,ruler/niah_single_1,4K,90\nMINE,avg,8K,30\n"
                                   "Other,avg,4K,50\nmine,avg,32K,70\n")
    section = md.split("## Claimed against measured", 1)[1].split("\n## ", 1)[0]
    assert "| org/Mine | mine | ruler/niah\\_single\\_1 | 4K | 90.0 | 100.0 \\[39.8, 100.0\\] (n=4) | -10.0 | inside the interval |" in section
    assert "| MINE | mine | avg | 8K | 30.0 | 100.0 \\[39.8, 100.0\\] (n=4) | -70.0 | below the interval |" in section
    assert f"| Other | — | avg | 4K | 50.0 | — | — | {NOT_REPRODUCED} |" in section
    assert f"| mine (reported) | — | avg | 32K | 70.0 | — | — | {NOT_REPRODUCED} |" in section  # the model, not that length
    assert "2 of 4 published numbers were measured here" in section
    row = next(r for r in claimed if r["published_model"] == "MINE")
    assert row == {"published_model": "MINE", "model": "mine", "task": "avg", "length": 8192, "published": 30.0,
                   "measured": 100.0, "lo": row["lo"], "hi": 100.0, "n": 4, "difference": -70.0,
                   "verdict": "below the interval"}
    assert round(row["lo"], 1) == 39.8


def test_a_board_without_published_rows_has_no_claimed_section(tmp_path):
    runs = tmp_path / "runs"
    _my_model(runs, "mine")
    frames = load_store(runs)
    build_report(frames.scores, out_dir=tmp_path / "board", cells=frames.cells, runs=frames.runs, n_boot=50)
    assert "Claimed against measured" not in (tmp_path / "board" / "leaderboard.md").read_text()
    assert json.loads((tmp_path / "board" / "results.json").read_text())["claimed"] == []


def test_name_rule_and_verdicts():
    assert name_key("meta-llama/Llama-3.1-8B-Instruct") == name_key("llama 3.1 8b instruct")
    assert name_key("Qwen2.5-7B [thinking on, 4096]") == name_key("Qwen2.5_7B")
    assert name_key("Llama-3.1-8B-Instruct + hqa_sft 180K") != name_key("Llama-3.1-8B-Instruct")
    assert verdict(0.5, 0.4, 0.6) == "inside the interval"
    assert verdict(0.7, 0.4, 0.6) == "above the interval"
    assert verdict(0.7, None, None) == "no measured interval"
