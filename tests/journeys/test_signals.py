"""Journey: a long command stopped by Ctrl-C or by SIGTERM (a scheduler's preemption, `kill`, `timeout`, `docker
stop`), then rerun (issue 21 item 6).

Both signals end every long command the same way: one line saying where it stopped and that a rerun resumes, exit
130 after SIGINT and 143 after SIGTERM, the terminal's cursor shown again if the progress bar hid it, and the rerun
carries on from where it stopped.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from .conftest import User, rows, stop, wait_for

HIDE, SHOW = "\x1b[?25l", "\x1b[?25h"
TERMINAL = {"TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "TTY_INTERACTIVE": "1"}  # rich draws its live bar as on a terminal
SCORE = ("ctxbench score --backend echo --backend-arg delay=1 --suite ruler-quick --tasks ruler/niah_single_1 "
         "--lengths 1024 --samples 16")


def _said(r) -> str:
    """The last line on stderr as the user reads it (terminal escapes, e.g. the cursor's, removed)."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.last_err_line)


def _run_dir(user: User) -> Path | None:
    found = sorted((user.cwd / "runs").glob("*/samples.jsonl"))
    return found[0].parent if found else None


@pytest.mark.slow  # ~27 s; the one signal handler is exercised in the default tier by test_sigterm_stops_a_training_with_one_line and tests/test_run_integrity.py's Ctrl-C
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143),
                                           # Ctrl-C's 130 and its line are also in tests/test_run_integrity.py
                                           pytest.param(signal.SIGINT, 130, marks=pytest.mark.slow)])
def test_a_stopped_score_says_so_restores_the_cursor_and_resumes(user: User, data_dir, sig, code):
    proc = user.start(SCORE, env=TERMINAL)
    wait_for(lambda: (d := _run_dir(user)) is not None and len(rows(d)) >= 2)
    r = stop(proc, sig)
    assert r.code == code, r.err[-2000:]
    assert _said(r).startswith("interrupted at ") and "rerun the same command to resume" in _said(r)
    assert "Traceback" not in r.err
    if HIDE in r.err:
        assert SHOW in r.err.rsplit(HIDE, 1)[1], "the cursor stays hidden"
    done = len(rows(_run_dir(user)))
    again = user.run(SCORE)
    assert again.code == 0, again.err[-2000:]
    assert len(list((user.cwd / "runs").iterdir())) == 1  # the same run, resumed
    assert len(rows(_run_dir(user))) == 16 and 2 <= done < 16


TRAIN = "ctxbench train cpt --config configs/trainers/cpt-tiny.yaml --store runs"


def _losses(user: User) -> int:
    return sum(len(p.read_text().splitlines()) for p in (user.cwd / "runs").glob("train-*/losses.jsonl"))


def _stopped_training(user: User, sig: int, code: int, after_losses: int, env: dict[str, str] | None = None):
    proc = user.start(TRAIN, env=env)  # a live bar's redraws fill the unread stderr pipe of a long run: short ones only
    wait_for(lambda: _losses(user) >= after_losses, timeout=900)
    r = stop(proc, sig)
    assert r.code == code, r.err[-2000:]
    assert "Traceback" not in r.err
    assert _said(r).startswith("interrupted at step ") and "rerun the same command to resume" in _said(r)
    if HIDE in r.err:
        assert SHOW in r.err.rsplit(HIDE, 1)[1], "the cursor stays hidden"
    assert not (next((user.cwd / "runs").glob("train-*/model")) / "config.json").exists()  # no finished-looking model
    return r


def test_sigterm_stops_a_training_with_one_line(user: User):
    _stopped_training(user, signal.SIGTERM, 143, after_losses=1, env=TERMINAL)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_training_keeps_its_checkpoint_and_resumes(user: User, sig, code):
    r = _stopped_training(user, sig, code, after_losses=23)  # past checkpoint-20 (a train row per step, eval every 10)
    assert "checkpoint-20 kept" in _said(r)
    again = user.run(TRAIN, timeout=900)
    assert again.code == 0, again.err[-2000:]
    assert "resumed from step 20" in again.out
