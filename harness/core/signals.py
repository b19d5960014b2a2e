"""SIGTERM handled like Ctrl-C: one path for every long command (score, train, data, study, lmeval).

A scheduler's preemption, `kill`, `timeout` and `docker stop` send SIGTERM, which by default ends Python at once:
no message, a rich bar's hidden cursor left hidden, a half-written file. `install()` turns SIGTERM into
`Terminated`, a KeyboardInterrupt, so the code that already unwinds on Ctrl-C (context managers that stop bars
and release locks, the runner's "interrupted at X/Y", the trainer's kept checkpoint) runs for both signals, and
the CLI exits 130 after SIGINT and 143 after SIGTERM (128 + the signal number, as shells report it).
"""

from __future__ import annotations

import signal
import threading

EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where the signal arrived."""

    exit_code = EXIT_SIGTERM


_received: list[int] = []  # signals that arrived (a command may turn the exception into its own exit code)


def _raise_terminated(signum, frame) -> None:
    _received.append(signum)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM while cleaning up ends the process at once
    raise Terminated()


_announced: list[str] = []  # interruptions that a command reports itself (Interrupted), so main() says nothing more


class Interrupted(Exception):
    """Ctrl-C or SIGTERM stopped a long command; `where` says where ("at step 12/40 ..."). Raised in place of the
    KeyboardInterrupt, which typer would turn into a silent exit 130; main() prints it as one line."""

    def __init__(self, where: str = ""):
        super().__init__(where)
        self.where = where
        self.exit_code = EXIT_SIGTERM if terminated() else EXIT_SIGINT
        _announced.append(where)


def announced() -> bool:
    """Whether this process raised an Interrupted (whose command or main() prints its line)."""
    return bool(_announced)


def install() -> None:
    """Raise Terminated on SIGTERM (main thread only: Python delivers signals there)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


def exit_code(exc: BaseException | None = None) -> int:
    """143 after SIGTERM, 130 after SIGINT (or any other interruption)."""
    return EXIT_SIGTERM if terminated() or isinstance(exc, Terminated) else EXIT_SIGINT


def terminated() -> bool:
    """Whether SIGTERM arrived in this process (a command that caught the interruption exits 130; main makes it 143)."""
    return signal.SIGTERM in _received
