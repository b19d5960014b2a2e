"""Issue 32 "Studies" and issue 31's docs seam: where a study writes, what it checks before training, and what its
interrupt line says.

A study writes under the results store (runs/studies/<name>), never a new directory of the cwd; offline without its
eval data it is refused in one line before the first training, with nothing written; Ctrl-C says which step it
stopped in (never `step 0/0`); docs/studies.md names the report's real place. In process (the CLI's own main).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import OfflineError

from .test_study_journeys import STUDY

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_name_the_report_where_it_is_written():
    from ctxbench.harness.studies.config import default_root
    from ctxbench.harness.studies.report import LEADERBOARD_DIR, REPORT_FILES

    text = " ".join((REPO / "docs" / "studies.md").read_text().split())
    found = re.search(r"`(study\.\w+)`, `(study\.\w+)` and `(study\.\w+)` in the study's directory \(`([^`]+)`, or "
                      r"`out_dir`\), beside its `data/`, `train/` and `runs/`; its `(\w+)/` holds the per-run leaderboard",
                      text)
    assert found, "docs/studies.md no longer says where the study report is"
    assert found.groups()[:3] == REPORT_FILES
    assert Path(found.group(4)) == default_root("<name>")
    assert found.group(5) == LEADERBOARD_DIR


def test_a_study_writes_under_the_store_not_the_cwd(ctxbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("study.yaml").write_text(STUDY)
    code, out, err = ctxbench("study", "study.yaml", "--check")
    assert code == 0, err
    assert "output runs/studies/tiny" in out, out
    code, out, err = ctxbench("study", "study.yaml", "--check", "--store", "elsewhere")
    assert "output elsewhere/studies/tiny" in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.yaml"]


@pytest.fixture()
def offline(monkeypatch, tmp_path):
    """No essays in the cache and no network: the essays' download fails as it does offline."""
    from ctxbench.tasks import haystacks

    def no_network(url, dest):
        raise OfflineError(f"cannot download {url} (URLError); pass a local path in the task args or --data-dir")

    monkeypatch.setattr(haystacks, "cache_dir", lambda *parts: tmp_path.joinpath("cache", *parts))
    monkeypatch.setattr(haystacks, "download_once", no_network)
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)


def test_a_study_without_its_eval_data_is_refused_before_training(ctxbench, tmp_path, monkeypatch, offline):
    from ctxbench.harness.studies import run

    def no_training(*args, **kwargs):
        raise AssertionError("the study trained before checking its eval data")

    monkeypatch.setattr(run, "_train", no_training)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    Path("study.yaml").write_text(STUDY.replace("ruler/niah_single_1", "ruler/niah_single_2"))  # an essay haystack
    code, out, err = ctxbench("study", "study.yaml")
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: eval.suite tiny-eval: cannot download") and "--data-dir" in line, line
    assert line.endswith("(checked before any training; nothing was trained)"), line
    assert sorted(p.name for p in work.iterdir()) == ["study.yaml"]  # nothing written


def test_the_eval_data_check_passes_with_the_data(data_dir):
    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.studies.progress import check_eval_data

    suite = Suite(name="e", lengths=[256], samples=2, tasks=[{"task": "ruler/niah_single_2"}])
    check_eval_data(suite, "smollm2-135m", data_dir)


def _interrupted_while(ctxbench, tmp_path, monkeypatch, step: str, exc: BaseException) -> tuple[int, str]:
    from ctxbench.harness.studies import run

    def stopped(study, console, data_dir, progress):
        progress.at(step)
        raise exc

    monkeypatch.setattr(run, "check_eval_data", lambda *a: None)
    monkeypatch.setattr(run, "_run_study", stopped)
    monkeypatch.chdir(tmp_path)
    Path("study.yaml").write_text(STUDY)
    code, out, err = ctxbench("study", "study.yaml")
    (line,) = err.strip().splitlines()
    return code, line


def test_an_interrupt_while_scoring_says_which_run_and_how_far(ctxbench, tmp_path, monkeypatch):
    from ctxbench.harness.run.runner import RunInterrupted, RunOutcome

    outcome = RunOutcome(store=None, planned=40, done=12)
    code, line = _interrupted_while(ctxbench, tmp_path, monkeypatch, "scoring b/s0, run 3 of 3", RunInterrupted(outcome))
    assert code == 130
    assert line == ("interrupted in study tiny while scoring b/s0, run 3 of 3 (at 12/40 samples); its finished steps "
                    "are kept; rerun the same command to resume")


def test_an_interrupt_before_the_first_step_never_says_step_0_of_0(ctxbench, tmp_path, monkeypatch):
    from ctxbench.harness.core.signals import Interrupted

    code, line = _interrupted_while(ctxbench, tmp_path, monkeypatch, "making data for and training a seed 0, training 1 "
                                    "of 2", Interrupted("at step 0/0 of training a-s0-x (no checkpoint yet)"))
    assert code == 130 and "0/0" not in line
    assert line.startswith("interrupted in study tiny while making data for and training a seed 0, training 1 of 2 "
                           "(before its first step)"), line


def test_a_plain_ctrl_c_names_the_step(ctxbench, tmp_path, monkeypatch):
    code, line = _interrupted_while(ctxbench, tmp_path, monkeypatch, "writing the report", KeyboardInterrupt())
    assert code == 130
    assert line.startswith("interrupted in study tiny while writing the report; its finished steps are kept"), line
