"""Third-party output of a score session goes to a run log, not to the terminal.

transformers, DeepSpeed, accelerate and the hub attach their own terminal handlers to their loggers (transformers'
dtype notice, DeepSpeed's "Setting accelerator to CPU") and draw tqdm bars while a GGUF model converts; Python
warnings from their code reach the terminal too. During a session, those records and warnings are written to a log
file (first a temporary one, since nothing may be written beside a run before its refusals have passed; then, once
the run exists, `<run>/logs/<file>`, which the session's record names under execution.log). Outside a session the
libraries' own handlers behave as before. ctxbench's own warnings stay on the terminal, one line each.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

THIRD_PARTY = ("transformers", "DeepSpeed", "deepspeed", "accelerate", "torch", "huggingface_hub", "datasets",
               "tokenizers", "urllib3", "filelock", "vllm", "lm-eval", "lm_eval", "httpx")
PACKAGE_DIR = str(Path(__file__).resolve().parents[1])  # the ctxbench checkout or install (harness/, tasks/, ...)

_active: logging.Handler | None = None  # the current session's file handler


class _Diverted(logging.Handler):
    """Stands in for a library's terminal handler: the session's log while one is active, else the original."""

    def __init__(self, original: logging.Handler):
        super().__init__(original.level)
        self.original = original

    def emit(self, record: logging.LogRecord) -> None:
        (_active or self.original).handle(record)


class _DivertingLogger(logging.Logger):
    """A library logger created during a session: a terminal handler it adds later is diverted."""

    def addHandler(self, hdlr: logging.Handler) -> None:  # noqa: N802 - logging's own name
        super().addHandler(_wrap(hdlr))


def _wrap(handler: logging.Handler) -> logging.Handler:
    terminal = (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    if type(handler) is logging.StreamHandler and getattr(handler, "stream", None) in terminal:
        return _Diverted(handler)
    return handler


def _divert_loggers() -> None:
    """Every third-party logger: existing terminal handlers wrapped; loggers not yet made are made diverting."""
    manager = logging.Logger.manager
    for name in THIRD_PARTY:
        existing = manager.loggerDict.get(name)
        if isinstance(existing, logging.Logger):
            for h in list(existing.handlers):
                wrapped = _wrap(h)
                if wrapped is not h:
                    existing.removeHandler(h)
                    logging.Logger.addHandler(existing, wrapped)
            continue
        previous = manager.loggerClass or logging.getLoggerClass()
        manager.setLoggerClass(_DivertingLogger)
        try:
            logging.getLogger(name)
        finally:
            manager.setLoggerClass(previous)


def is_third_party(filename: str) -> bool:
    """A warning raised outside ctxbench's own code."""
    return not str(Path(filename).resolve()).startswith(PACKAGE_DIR)


def log_warning(message: str) -> bool:
    """Write a third-party warning to the session's log; False where no session is active."""
    if _active is None:
        return False
    _active.handle(logging.LogRecord("py.warnings", logging.WARNING, "", 0, message, None, None))
    return True


@contextmanager
def third_party_log() -> Iterator[Path]:
    """A session: third-party output goes to the returned (temporary) path until the block ends."""
    global _active
    fd, name = tempfile.mkstemp(prefix="ctxbench-run-", suffix=".log")
    os.close(fd)
    handler = logging.FileHandler(name, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    saved = {k: os.environ.get(k) for k in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")}
    os.environ.update({"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"})  # conversion bars: no log line
    _divert_loggers()
    _active = handler
    try:
        yield Path(name)
    finally:
        _active = None
        handler.close()
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def session_log_name() -> str:
    """`logs/<UTC time>-<pid>.log`: one log per session, named in its record before the file is moved there."""
    import datetime as dt

    return f"logs/{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}.log"


def keep_log(temporary: Path, run_dir: Path | None, relative: str) -> None:
    """Move the session's log beside its run (under the name the record gives), or drop it where no run was made."""
    if run_dir is not None and run_dir.is_dir() and temporary.exists():
        target = run_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(temporary), str(target))
    else:
        temporary.unlink(missing_ok=True)
