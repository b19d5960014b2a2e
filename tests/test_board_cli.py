"""`ctxbench board build|import` over a store of (model-free) runs: tables, comparisons, imports, errors."""

import csv
import os
import subprocess
import sys

import pytest

SUITE = """name: cmp
lengths: [512, 1024]
samples: 3
tasks:
  - ruler/niah_single_1
  - task: niah/single
    args: {depths: 3}
"""


def _cli(*args, cwd):
    env = {**os.environ, "COLUMNS": "120"}  # what the command prints, whatever the shell's width
    return subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # ~14 s; the paired statistics are tests/leaderboard's
def test_board_with_comparison_and_import(tmp_path, repo_root, data_dir):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    store = tmp_path / "runs"
    for label in ("A", "B"):
        r = _cli("score", "--suite", str(suite), "--store", str(store), "--backend", "echo", "--label", label,
                 "--data-dir", str(data_dir), cwd=repo_root)
        assert r.returncode == 0, r.stderr
    paper = tmp_path / "paper.csv"
    paper.write_text("model,task,length,score,claimed_length\nPaperModel,avg,512,91.0,4K\nPaperModel,avg,1024,80.0,4K\n")
    r = _cli("board", "import", str(paper), "--store", str(store), cwd=repo_root)
    assert r.returncode == 0 and "imported 2" in r.stdout
    board = tmp_path / "board"
    r = _cli("board", "build", "--store", str(store), "--out", str(board), "--compare", "A:B", cwd=repo_root)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader((board / "results.csv").open()))
    models = {row["model"] for row in rows}
    assert {"A", "B", "PaperModel"} <= models
    md = (board / "leaderboard.md").read_text()
    assert "PaperModel" in md and "512" in md  # the reported model: in its own table, below the measured ones
    main = md.split("## Main results", 1)[1].split("\n## ", 1)[0]
    assert main.index("| A |") < main.index("Reported in publications") < main.index("PaperModel")
    html = (board / "index.html").read_text()
    assert "A − B" in html or "A - B" in html or "A vs B" in html


def test_board_errors_are_one_line(tmp_path, repo_root, ctxbench, monkeypatch):
    monkeypatch.chdir(repo_root)  # the CLI in process: a refusal needs no process of its own
    code, _, err = ctxbench("board", "build", "--store", str(tmp_path / "empty"), "--out", str(tmp_path / "b"))
    assert code == 2 and "no scored runs" in err and "Traceback" not in err
    bad = tmp_path / "bad.csv"
    bad.write_text("model,task,length,score\nX,avg,abc,50\n")
    code, _, err = ctxbench("board", "import", str(bad), "--store", str(tmp_path / "runs"))
    assert code == 2 and "length" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()
    code, _, _ = ctxbench("board", "build", "--store", str(tmp_path / "runs"), "--compare", "AB")
    assert code == 2
