"""Issue 32, "Internal errors are never reported as bad input": exit 2 is only for what the user can fix; a bug exits 1
with one line that says "internal error" and names the file its traceback was saved to. And the seam that showed it:
`board import` of per-task published rows whose tasks were scored at different lengths, then `board build`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import EXIT_INTERNAL, internal_error_line


def broken(*args, **kwargs):
    raise KeyError("injected")  # a bug inside board build, not anything the user typed


@pytest.fixture
def cli(ctxbench, tmp_path, monkeypatch):
    """`ctxbench ARGS...` through main() in this process (none of these is about processes), run in tmp_path with a
    private cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "120")
    return ctxbench


def test_an_injected_internal_error_exits_1_with_a_saved_traceback(tmp_path, cli, monkeypatch):
    import ctxbench.leaderboard as leaderboard

    (tmp_path / "paper.csv").write_text("model,task,length,score\nP,avg,4K,90\n")
    assert cli("board", "import", "paper.csv")[0] == 0
    monkeypatch.setattr(leaderboard, "build_report", broken)  # board build imports it when it runs
    code, _, stderr = cli("board", "build", "--store", "runs")
    assert code == EXIT_INTERNAL == 1, stderr
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("internal error") and "KeyError" in lines[0], stderr
    assert "Traceback" not in stderr and "error: board build" not in stderr  # never called bad input
    saved = Path(re.search(r"traceback saved to (\S+);", lines[0]).group(1))
    assert saved.is_file() and saved.is_relative_to(tmp_path / "cache")
    text = saved.read_text()
    assert "Traceback" in text and "injected" in text and "board build" in text  # the command and the whole stack


def test_the_line_says_where_the_traceback_is(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path))
    try:
        raise ValueError("zip() argument 2 is shorter than argument 1")
    except ValueError as e:
        line = internal_error_line(e)
    assert line.startswith("internal error") and "ValueError: zip()" in line
    (saved,) = (tmp_path / "errors").iterdir()
    assert str(saved) in line


def test_per_task_published_rows_at_different_lengths_import_then_build(tmp_path, cli):
    """The seam: each task of the paper scored at its own lengths (no task at every length), then `board build`."""
    paper = tmp_path / "paper.csv"
    paper.write_text("model,task,length,score\nP,ruler/a,4K,90\nP,ruler/a,8K,80\nP,ruler/b,16K,70\n")
    assert cli("board", "import", str(paper))[0] == 0
    code, _, stderr = cli("board", "build")
    assert code == 0, stderr
    assert "internal error" not in stderr and (tmp_path / "board" / "index.html").is_file()
    assert "P" in (tmp_path / "board" / "results.csv").read_text()
