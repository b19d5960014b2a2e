"""Journeys: the real `ctxbench` command in a subprocess, in a temporary directory, typed as a user types it.

Refusals, which stop before any work, run the same command line in process (`user_in_process`: no Python start-up
per command); what needs a process (signals, locks, packaging, extras, the pty) runs as `user`.

Each journey asserts what the user sees (the exit code, the one line, the board's cells) and what is on disk
(nothing written, the same run resumed, no extra rows). The echo backend stands in for a model wherever the model
is not the point; `tiny_checkpoint` is the 2-layer checkpoint of configs/trainers/cpt-tiny.yaml, trained once per
test session and shared.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("CTXBENCH_DATA_DIR", REPO / ".." / "shared" / "data")).resolve()


def ctxbench_argv() -> list[str]:
    """The installed `ctxbench` script beside this Python, else `python -m` (the same entry point)."""
    script = Path(sys.executable).parent / "ctxbench"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "ctxbench.harness.cli"]


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def last_err_line(self) -> str:
        lines = [x for x in self.err.splitlines() if x.strip()]
        return lines[-1] if lines else ""


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "120", "CTXBENCH_DATA_DIR": str(DATA_DIR)}
    env.pop("PYTEST_CURRENT_TEST", None)
    return {**env, **(extra or {})}


def _argv(command: str | list[str]) -> list[str]:
    args = shlex.split(command) if isinstance(command, str) else list(command)
    if args and args[0] == "ctxbench":
        args = args[1:]
    return [*ctxbench_argv(), *args]


def default_signals() -> None:
    """In the child: SIGINT back to its default, so Python turns it into KeyboardInterrupt. A test run started in
    the background by a non-interactive shell (`cmd &`, as CI scripts do) inherits SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class User:
    """A user at a shell in `cwd`: `run("ctxbench score ...")` waits; `start(...)` runs in the background."""

    def __init__(self, cwd: Path):
        self.cwd = cwd

    def run(self, command: str | list[str], *, env: dict[str, str] | None = None, timeout: float = 600,
            cwd: Path | None = None) -> Result:
        p = subprocess.run(_argv(command), cwd=cwd or self.cwd, env=_env(env), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=default_signals)
        return Result(p.returncode, p.stdout, p.stderr)

    def start(self, command: str | list[str], *, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
        return subprocess.Popen(_argv(command), cwd=cwd or self.cwd, env=_env(env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, preexec_fn=default_signals)

    def files(self, under: str = ".") -> set[str]:
        """Every file and directory under `under`, relative to the user's directory (what is on disk)."""
        root = self.cwd / under
        return {str(p.relative_to(self.cwd)) for p in root.rglob("*")} if root.exists() else set()


def stop(proc: subprocess.Popen, sig: int, timeout: float = 120) -> Result:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    return Result(proc.returncode, out, err)


def wait_for(predicate: Callable[[], bool], timeout: float = 300.0) -> None:
    """Poll until `predicate()` holds; the deadline guards against a hung test and is not a speed assertion."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the command did not get that far"
        time.sleep(0.1)


def rows(run_dir: Path) -> list[str]:
    """The sample lines of a run directory (all parts)."""
    return [line for p in sorted(run_dir.glob("samples*.jsonl")) for line in p.read_text().splitlines() if line.strip()]


class InProcessUser(User):
    """The same user, but `run` goes through the CLI's main() in this process (tests/conftest.py's `ctxbench`), in the
    user's directory with the journey environment: for refusals and listings, which need no process of their own and
    would pay a Python start-up each. Signals, locks, packaging, extras and the pty stay on `user`."""

    def __init__(self, cwd: Path, cli: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch):
        super().__init__(cwd)
        self._cli, self._monkeypatch = cli, monkeypatch

    def run(self, command: str | list[str], *, env: dict[str, str] | None = None, timeout: float = 600,
            cwd: Path | None = None) -> Result:
        args = _argv(command)[len(ctxbench_argv()):]
        with self._monkeypatch.context() as m:
            m.chdir(cwd or self.cwd)
            for name, value in {"COLUMNS": "120", "CTXBENCH_DATA_DIR": str(DATA_DIR), **(env or {})}.items():
                m.setenv(name, value)
            return Result(*self._cli(*args))

    def start(self, command, *, env=None, cwd=None):
        raise TypeError("a command in the background needs a process: use the `user` fixture")


@pytest.fixture()
def user(tmp_path: Path) -> User:
    work = tmp_path / "work"
    work.mkdir()
    return User(work)


@pytest.fixture()
def user_in_process(tmp_path: Path, ctxbench, monkeypatch) -> InProcessUser:
    """`user`, with its commands run in this process (see InProcessUser): for refusals."""
    work = tmp_path / "work"
    work.mkdir()
    return InProcessUser(work, ctxbench, monkeypatch)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """configs/trainers/cpt-tiny.yaml trained once per test session (a few steps; 512-token context), typed as a user
    types it from a directory outside the checkout; once per test run, also under pytest -n. Journeys copy it before
    changing it."""
    from tests.conftest import built_once

    def train(work: Path) -> str:
        r = User(work).run("ctxbench train cpt --config configs/trainers/cpt-tiny.yaml --max-steps 4", timeout=900)
        assert r.code == 0, r.err[-3000:]
        line = next(x for x in r.out.splitlines() if x.startswith("checkpoint: "))
        path = Path(line.removeprefix("checkpoint: ").strip())
        return str(path if path.is_absolute() else work / path)

    path = Path(built_once(tmp_path_factory, "tiny", train))  # once per run, shared by pytest -n workers
    assert (path / "config.json").is_file()
    return path


@pytest.fixture()
def tiny_copy(tiny_checkpoint: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "tiny-model"
    shutil.copytree(tiny_checkpoint, dst)
    return dst
