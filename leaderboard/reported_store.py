"""The published tables a store keeps (`ctxbench board import`): validated, copied into the store's _reported/
folder keyed by content, and read back beside the measured runs at every board build."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write
from ctxbench.harness.core.redact import printable

REPORTED_DIR = "_reported"


def reported_frame(root: Path) -> pd.DataFrame:
    from ctxbench.leaderboard import import_reported_csv

    files = sorted((Path(root) / REPORTED_DIR).glob("*.csv"))
    frame = pd.concat([import_reported_csv(f) for f in files], ignore_index=True) if files else pd.DataFrame()
    if not frame.empty:
        frame["model"] = frame["model"].map(printable)  # a published name cannot carry escape codes onto the board
    return frame


def import_reported(root: Path, csv: Path) -> tuple[int, Path | None]:
    """Validate a published-results CSV, then keep a copy in the store so every board includes it.
    Returns its row count and the copy already in the store holding these very bytes (None: copied now)."""
    from ctxbench.leaderboard import import_reported_csv

    if not csv.exists():
        raise ConfigError(f"board import: {csv} does not exist")
    try:
        rows = import_reported_csv(csv)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    content = csv.read_bytes()
    kept = sorted((Path(root) / REPORTED_DIR).glob("*.csv"))
    same = next((p for p in kept if p.read_bytes() == content), None)
    if same is not None:
        return len(rows), same
    keys = set(zip(rows["model"], rows["task"], rows["length"]))
    for p in kept:
        old = import_reported_csv(p)
        clash = next((k for k in zip(old["model"], old["task"], old["length"]) if k in keys), None)
        if clash:
            raise ConfigError(f"board import: {csv} gives {clash[0]!r} {clash[1]} at {clash[2]} again, already imported "
                              f"from {p.name}; rename the model in one table (e.g. add the paper), or delete {p}")
    # Keyed by content: two papers' tables are often both called table1.csv or results.csv.
    atomic_write(Path(root) / REPORTED_DIR / f"{csv.stem}-{hashlib.sha256(content).hexdigest()[:8]}.csv", content)
    return len(rows), None
