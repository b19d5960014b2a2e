"""Helpers shared by CLI command modules: consoles and parsers of CLI values."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from rich.console import Console

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.lengths import parse_length

err = Console(stderr=True, soft_wrap=True)  # messages stay one line however narrow the terminal
out = Console(soft_wrap=True)


def _ints(value: Optional[str], field: str) -> Optional[list[int]]:
    if not value:
        return None
    try:
        return [parse_length(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{field}: expected comma-separated lengths like 1024,2048 or 4k,8k, got {value!r}") from None


def _kv(items: list[str], field: str) -> dict:
    outd = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"{field}: expected KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            outd[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            outd[k.strip()] = v
    return outd


def writable_dir(path: Path, field: str) -> Path:
    """Refuse, before any work, an output directory that sits under a file (or is one)."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                what = "is" if p == path else f"is under {p}, which is"
                raise ConfigError(f"{field}: {path} {what} a file, not a directory; choose another path")
            if not os.access(p, os.W_OK | os.X_OK):
                raise ConfigError(f"{field}: {p} is not writable; choose another path")
            break
    return path


def _data_dir(value: Optional[Path]) -> Optional[Path]:
    value = value or (Path(os.environ["CTXBENCH_DATA_DIR"]) if os.environ.get("CTXBENCH_DATA_DIR") else None)
    if value is not None and not value.is_dir():
        raise ConfigError(f"--data-dir: {value} is not a directory")
    return value


