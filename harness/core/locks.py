"""One writer per output: the lock every command that writes an output takes (score, data, train, study).

A second process that would write the same output is refused with one line naming the holder (pid, host, since),
instead of both writing and one deleting the other's files. The lock is an OS file lock (filelock), so a writer
killed by any signal releases it; the holder file beside it is only what the refusal says.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write_json

LOCK_NAME = ".ctxbench-writer.lock"  # inside an output directory


def holder_path(lock_path: Path) -> Path:
    return Path(lock_path).with_suffix(".holder.json")


def describe_holder(lock_path: Path) -> str:
    """'pid 123 on host since 2026-...' of the process holding `lock_path` (question marks if unknown)."""
    try:
        who = json.loads(holder_path(lock_path).read_text())
    except (OSError, ValueError):
        who = {}
    who = who if isinstance(who, dict) else {}
    return f"pid {who.get('pid', '?')} on {who.get('host', '?')} since {who.get('since', '?')}"


@contextlib.contextmanager
def single_writer(lock_path: str | Path, *, what: str, noun: str = "it", fix: str = "wait for it to finish") -> Iterator[None]:
    """Hold `lock_path` while writing `what`; a second writer gets ConfigError("<what>: another process is writing
    <noun> (pid, host, since); <fix>"). The lock's directory must exist (callers create it after validating input)."""
    lock_path = Path(lock_path)
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigError(f"{what}: another process is writing {noun} ({describe_holder(lock_path)}); {fix}") from None
    holder = holder_path(lock_path)
    try:
        atomic_write_json(holder, {"pid": os.getpid(), "host": socket.gethostname(),
                                   "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


@contextlib.contextmanager
def output_writer(out_dir: str | Path, *, what: str | None = None, fix: str = "wait for it to finish") -> Iterator[Path]:
    """single_writer() for an output directory: holds its lock file inside it. A directory this call created and
    nothing but the lock was written to (the command refused its input, or was refused) is removed again."""
    out = Path(out_dir)
    created = [d for d in (out, *out.parents) if not d.exists()]  # this call makes them: out first, its new parents after
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_NAME
    try:
        with single_writer(lock, what=what or str(out), fix=fix):
            yield out
    finally:
        if created and {p.name for p in out.iterdir()} <= {LOCK_NAME, holder_path(lock).name}:
            lock.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                for d in created:  # innermost first; stops at the first that is not empty
                    d.rmdir()
