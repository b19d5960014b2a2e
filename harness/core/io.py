"""File I/O every layer shares: atomic writes, append-only JSON lines, one tolerant reader, safe names.

Atomic writes go to a uniquely named temp file in the destination's directory (so concurrent writers never
collide on a fixed temp name), are fsynced, then renamed over the target: a reader sees the old file or the
new one, never a torn one. JSON-lines files are appended with one write() on an O_APPEND descriptor; a killed
writer can leave at most one torn last line, which `cut_torn_tail` removes before the next append.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An OSError raised while writing `path` names it: a full disk mid-write (os.write, fsync) raises one without a
    file name, and the CLI then says which file could not be written instead of showing a traceback."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


def atomic_write(path: str | Path, data: str | bytes | Callable[[IO[bytes]], Any], *, mode: int = 0o644) -> Path:
    """Write `data` (text, bytes, or a function that writes to a binary file object) to `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, mode)  # mkstemp creates 0600; results are meant to be shared
        with naming(path), os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | Path, obj: Any, *, indent: int | None = 2) -> Path:
    return atomic_write(path, json.dumps(jsonable(obj), indent=indent, sort_keys=True, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Build a directory under a unique temp name and rename it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish_files(src: str | Path, dest: str | Path, *, last: str | tuple[str, ...]) -> None:
    """Move every entry of the staging directory `src` into `dest` (each rename atomic; a directory replaces one of
    its name), the marker files `last` after all others and in that order, then remove `src`: readers that wait for
    the markers never see a partial set."""
    src, dest = Path(src), Path(dest)
    order = {name: i + 1 for i, name in enumerate((last,) if isinstance(last, str) else last)}
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir(), key=lambda f: order.get(f.name, 0)):
        target = dest / f.name
        if f.is_dir() and target.is_dir():
            shutil.rmtree(target)
        os.replace(f, target)
    src.rmdir()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` for a callee that writes a file by name; renamed over `path` only if the
    block succeeds, removed otherwise: a kill leaves no torn file under the real name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def cut_torn_tail(path: str | Path) -> None:
    """Drop a torn trailing line left by a killed writer, so the next append starts on a fresh line."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        # scan back for the last newline without reading the whole file
        pos, chunk = size, 1 << 16
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            block = f.read(pos - start)
            nl = block.rfind(b"\n")
            if nl >= 0:
                f.truncate(start + nl + 1)
                return
            pos = start
        f.truncate(0)


def append_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows as JSON lines with a single write() on an O_APPEND descriptor, then fsync."""
    blob = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    if not blob:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        with naming(path):
            os.write(fd, blob)
            os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class ReadStats:
    """What `read_jsonl` skipped: corrupt lines by `file:line`, and a torn last line (not an error)."""

    bad: list[str] = field(default_factory=list)
    torn: int = 0


def read_jsonl(path: str | Path, *, stats: ReadStats | None = None, require: tuple[str, ...] = (),
               warn: bool = True) -> Iterator[dict[str, Any]]:
    """Rows of a JSON-lines file, read line by line. A torn last line (no newline) is ignored; a corrupt line
    elsewhere, or a row without the `require`d keys, is skipped with a warning naming `file:line`, and counted."""
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith("\n"):
                stats.torn += 1
                continue
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                ok = isinstance(row, dict) and all(k in row for k in require)
            except json.JSONDecodeError:
                ok = False
            if not ok:
                where = f"{path}:{n}"
                stats.bad.append(where)
                if warn:
                    what = f"without {', '.join(require)}" if require else "not a JSON object"
                    warnings.warn(f"{where}: skipped a corrupt line ({what})", stacklevel=2)
                continue
            yield row


_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def slug(text: str, *, max_len: int = 40, default: str = "x") -> str:
    """A name safe as one path component: no separators, no '..', bounded length."""
    s = _SLUG.sub("_", str(text)).strip("._-")[:max_len].strip("._-")
    return s or default


def jsonable(value: Any) -> Any:
    """Plain JSON types: numpy scalars unwrapped, NaN/inf and pandas NA to null, unknown objects to str."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return jsonable(item())
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    return str(value)


def cached_npy(path: str | Path, build: Callable[[], Any], *, check: Callable[[Any], bool] | None = None) -> Any:
    """A numpy array cached at `path`: loaded if intact, else built, saved atomically and returned.

    A torn or corrupt cache file (a crash before atomic writes, a full disk) is detected, rebuilt and warned
    about, instead of breaking every later run.
    """
    import numpy as np

    path = Path(path)
    if path.exists():
        try:
            arr = np.load(path, allow_pickle=False)
            if check is None or check(arr):
                return arr
            raise ValueError("unexpected contents")
        except (ValueError, EOFError, OSError) as e:
            warnings.warn(f"{path}: corrupt cache entry ({e.__class__.__name__}); rebuilding it", stacklevel=2)
    arr = build()
    atomic_write(path, lambda f: np.save(f, arr))
    return arr
