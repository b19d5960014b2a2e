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
    signal_name = "SIGTERM"


_received: list[int] = []  # signals that arrived (a command may turn the exception into its own exit code)


def _raise_terminated(signum, frame) -> None:
    _received.append(signum)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM while cleaning up ends the process at once
    raise Terminated()


def install() -> None:
    """Raise Terminated on SIGTERM (main thread only: Python delivers signals there)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


def interruption(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (or Terminated) behind `exc`, following causes: click and typer re-raise Ctrl-C as
    Abort or Exit(130) from the original."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def exit_code(exc: BaseException | None) -> int:
    """143 after SIGTERM, 130 after SIGINT (or any other interruption)."""
    return EXIT_SIGTERM if terminated() else getattr(interruption(exc), "exit_code", EXIT_SIGINT)


def terminated() -> bool:
    """Whether SIGTERM arrived in this process (a command that caught the interruption exits 130; main makes it 143)."""
    return signal.SIGTERM in _received


def signal_name(exc: BaseException | None) -> str:
    return getattr(interruption(exc), "signal_name", "SIGINT")
