"""Turn the results store into the leaderboard's per-sample frame; keep imported published results beside it."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write
from ctxbench.harness.core.store import list_runs

REPORTED_DIR = "_reported"


def runs_frame(root: Path, run_ids: list[str] | None = None) -> pd.DataFrame:
    """One row per scored sample of every run (the latest result per sample id)."""
    stores = list_runs(root)
    if run_ids:
        known = {s.dir.name: s for s in stores}
        missing = [r for r in run_ids if r not in known]
        if missing:
            raise ConfigError(f"--runs: no run {missing[0]!r} in {root}; known: {', '.join(sorted(known)) or 'none'}")
        stores = [known[r] for r in run_ids]
    frames = []
    for store in stores:
        rec = store.read_record()
        rows = [r for r in store.latest().values() if r.get("score") is not None]
        if not rows:
            continue
        df = pd.DataFrame(rows)
        df["model"] = rec.get("label") or rec["model"]
        df["run_id"] = rec["run_id"]
        df["claimed_length"] = rec.get("backend_args", {}).get("context_length", math.nan)
        df["depth"] = [_depth(r) for r in rows]
        df["position"] = [r.get("position", math.nan) if r.get("position") is not None else math.nan for r in rows]
        df["source"] = "measured"
        frames.append(df)
    cols = ["model", "run_id", "task", "category", "length", "depth", "index", "score", "position", "source",
            "claimed_length", "prediction", "answers"]
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    return out[[c for c in cols if c in out.columns]]


def _depth(row: dict) -> float:
    """The depth axis of a sample: the requested grid depth if any, else its single needle's realised depth."""
    if row.get("depth") is not None:
        return float(row["depth"])
    depths = row.get("depths") or []
    return float(depths[0]) if len(depths) == 1 else math.nan


def reported_frame(root: Path) -> pd.DataFrame:
    from ctxbench.leaderboard import import_reported_csv

    files = sorted((Path(root) / REPORTED_DIR).glob("*.csv"))
    return pd.concat([import_reported_csv(f) for f in files], ignore_index=True) if files else pd.DataFrame()


def import_reported(root: Path, csv: Path) -> int:
    """Validate a published-results CSV, then keep a copy in the store so every board includes it."""
    from ctxbench.leaderboard import import_reported_csv

    if not csv.exists():
        raise ConfigError(f"board import: {csv} does not exist")
    try:
        rows = import_reported_csv(csv)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    atomic_write(Path(root) / REPORTED_DIR / csv.name, csv.read_bytes())
    return len(rows)


def examples(df: pd.DataFrame, per_task: int = 2) -> list[dict]:
    if df.empty or "prediction" not in df:
        return []
    pick = df[df["source"] == "measured"].groupby(["model", "task"], sort=True).head(per_task)
    return [
        {"model": r.model, "task": r.task, "length": int(r.length), "index": int(r.index), "score": float(r.score),
         "prediction": str(r.prediction), "reference": ", ".join(map(str, r.answers))}
        for r in pick.itertuples()
    ]
