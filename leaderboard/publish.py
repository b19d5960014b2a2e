"""A board is published whole: its files are built in a temporary folder and moved into `--out` together."""

from __future__ import annotations

import errno
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import publish_files

NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def publish_board(out: Path, write: Callable[[Path], None]) -> None:
    """Build a board's files in a temporary folder beside `out`, then move them into `out` (renames, which need no
    space): a build that fails half-way, on a full disk say, leaves the previous board whole, never a mix of two
    builds. A full disk is one line naming the folder; other files the user keeps in `out` stay."""
    where = Path(out).absolute()
    tmp: Path | None = None
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=where.parent, prefix=f".{where.name}.", suffix=".tmp"))
        write(tmp)
        publish_files(tmp, where, last=("leaderboard.md", "index.html"))
    except BaseException as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) and e.errno in NO_SPACE:
            raise ConfigError(f"board build: {out}: {e.strerror or 'no space left on device'} while writing the board; "
                              f"free space there or pass another --out (the board in {out} is unchanged)") from None
        raise
