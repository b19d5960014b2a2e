"""User-facing errors: one line, naming the field and the fix; the CLI prints them without a traceback. An internal
error (a bug) is never reported as the user's: exit 1, one line, and the traceback saved to a file it names."""

from pathlib import Path
from typing import NoReturn

EXIT_USAGE = 2  # bad input: a one-line error, nothing written
EXIT_FAILED = 3  # the run finished, but some samples ended in error (rerun to retry them)
EXIT_INTERRUPTED = 130  # Ctrl-C (rerun to resume)


class CtxbenchError(Exception):
    """An error caused by the user's input or environment, not by a bug in ctxbench."""


class ConfigError(CtxbenchError):
    """A config key or value is wrong."""


class OfflineError(CtxbenchError):
    """Something must be downloaded, but the machine is offline."""


class PromptTooLongError(CtxbenchError):
    """A prompt does not fit the model's context and no truncation policy allows cutting it."""


EXIT_INTERNAL = 1  # a bug in ctxbench: one line naming the saved traceback, never called bad input

DISK_ERRORS = (28, 122, 30, 5)  # ENOSPC, EDQUOT, EROFS, EIO: the machine's disk, not ctxbench, refused a write


def os_error_line(e: OSError) -> str:
    """One line for an OSError the user can act on: the path (when known) and what to do. A full disk names the file
    it could not write and says that a rerun resumes (rows are appended whole or cut back to the last whole line)."""
    where = f"{e.filename} -> {e.filename2}" if e.filename2 else (str(e.filename) if e.filename is not None else "")
    what = f"{where}: {e.strerror or e}" if where else f"{e.strerror or e} while writing"
    if e.errno in DISK_ERRORS:
        return f"{what}; free space on that disk (or pass --store/--out on another) and rerun: finished work is kept"
    return f"{what}; check the path and its permissions"


def save_traceback(exc: BaseException) -> Path | None:
    """Write the command line and `exc`'s traceback to a file of its own (under $CTXBENCH_CACHE/errors, else the temp
    directory), so an internal error costs the user one line and the bug report loses nothing. None: nowhere writable."""
    import datetime as dt
    import os
    import sys
    import tempfile
    import traceback

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = "command: " + " ".join(sys.argv) + "\n\n" + "".join(traceback.format_exception(exc))
    roots = [Path(os.environ.get("CTXBENCH_CACHE", Path.home() / ".cache" / "ctxbench")) / "errors",
             Path(tempfile.gettempdir())]
    for root in roots:
        try:
            root.mkdir(parents=True, exist_ok=True)
            path = root / f"ctxbench-internal-{stamp}-{os.getpid()}.txt"
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def internal_error_line(exc: BaseException) -> str:
    """The one line an internal error prints: what broke, where its traceback is, and that it is ctxbench's bug."""
    path = save_traceback(exc)
    what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    saved = f"traceback saved to {path}" if path is not None else "the traceback could not be saved"
    return f"internal error (a bug in ctxbench, not your input): {what}; {saved}; please report it with that file"


def exit_internal(exc: BaseException) -> NoReturn:
    """Print the internal-error line on stderr and exit 1 (harness/cli.py main's last resort)."""
    import sys

    print(internal_error_line(exc), file=sys.stderr, flush=True)
    sys.exit(EXIT_INTERNAL)
