"""Issue 32, "Internal errors are never reported as bad input": exit 2 is only for what the user can fix; a bug exits 1
with one line that says "internal error" and names the file its traceback was saved to. And the seam that showed it:
`board import` of per-task published rows whose tasks were scored at different lengths, then `board build`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ctxbench.harness.core.errors import EXIT_INTERNAL, internal_error_line

INJECT = """
import sys
import ctxbench.leaderboard as leaderboard

def broken(*args, **kwargs):
    raise KeyError("injected")  # a bug inside board build, not anything the user typed

leaderboard.build_report = broken
sys.argv = ["ctxbench", "board", "build", "--store", "runs"]
from ctxbench.harness.cli import main
main()
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "CTXBENCH_CACHE": str(tmp_path / "cache"), "COLUMNS": "120"}


def test_an_injected_internal_error_exits_1_with_a_saved_traceback(tmp_path):
    (tmp_path / "paper.csv").write_text("model,task,length,score\nP,avg,4K,90\n")
    assert _cli("board", "import", "paper.csv", cwd=tmp_path).returncode == 0
    p = subprocess.run([sys.executable, "-c", INJECT], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == EXIT_INTERNAL == 1, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("internal error") and "KeyError" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and "error: board build" not in p.stderr  # never called bad input
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


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", *args], cwd=cwd, env=_env(cwd),
                          capture_output=True, text=True, timeout=300)


def test_per_task_published_rows_at_different_lengths_import_then_build(tmp_path):
    """The seam: each task of the paper scored at its own lengths (no task at every length), then `board build`."""
    paper = tmp_path / "paper.csv"
    paper.write_text("model,task,length,score\nP,ruler/a,4K,90\nP,ruler/a,8K,80\nP,ruler/b,16K,70\n")
    assert _cli("board", "import", str(paper), cwd=tmp_path).returncode == 0
    r = _cli("board", "build", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "internal error" not in r.stderr and (tmp_path / "board" / "index.html").is_file()
    assert "P" in (tmp_path / "board" / "results.csv").read_text()
