"""The per-sample ("long") score frame every leaderboard function consumes.

One place validates and fills the contract's optional columns so that the
aggregation code can assume a clean frame (scores on the 0..1 scale, a
``source`` column, NaN where a value does not apply).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxbench.harness.core.lengths import format_length, parse_length  # noqa: F401 (re-exported)

REQUIRED = ("model", "task", "length", "score")
OPTIONAL_DEFAULTS: dict[str, object] = {
    "run_id": "",
    "category": None,
    "depth": np.nan,
    "index": 0,
    "position": np.nan,
    "source": "measured",
    "claimed_length": np.nan,
    "seed": -1,  # the run's seed: pairs match on it, so samples with different needles are never paired
}
SOURCES = ("measured", "reported")
REPORTED_SUFFIX = " (reported)"
AVG_TASK = "avg"

def normalise(df: pd.DataFrame) -> pd.DataFrame:
    """Return a validated copy of a long score frame with every contract column present.

    Reported rows whose model name also has measured rows are renamed
    ``"<name> (reported)"`` so a reproduction and the paper's numbers can sit
    side by side instead of being silently averaged together.
    """
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"score frame is missing required column(s): {', '.join(missing)}")
    out = df.copy()
    for col, default in OPTIONAL_DEFAULTS.items():
        if col not in out.columns:
            out[col] = default
    out["model"] = out["model"].astype(str)
    out["task"] = out["task"].astype(str)
    out["run_id"] = out["run_id"].fillna("").astype(str)
    out["source"] = out["source"].fillna("measured").astype(str)
    bad_source = sorted(set(out["source"]) - set(SOURCES))
    if bad_source:
        raise ValueError(f"column 'source' must be one of {SOURCES}, got {bad_source[0]!r}")
    out["category"] = out["category"].astype(object).where(out["category"].notna(), None)
    for col in ("length", "score", "depth", "position", "claimed_length", "index"):
        out[col] = pd.to_numeric(out[col], errors="raise")
    if out["length"].isna().any():
        raise ValueError("column 'length' has missing values")
    out["length"] = out["length"].astype(np.int64)
    out["index"] = out["index"].fillna(0).astype(np.int64)
    out["seed"] = pd.to_numeric(out["seed"], errors="coerce").fillna(-1).astype(np.int64)
    scores = out["score"]
    if scores.isna().any():
        raise ValueError("column 'score' has missing values")
    if ((scores < 0) | (scores > 1)).any():
        worst = scores[(scores < 0) | (scores > 1)].iloc[0]
        raise ValueError(
            f"column 'score' must be on the 0..1 scale, got {worst!r} "
            "(import published percentages with import_reported_csv)"
        )
    return _separate_reported(out)


def _separate_reported(df: pd.DataFrame) -> pd.DataFrame:
    measured = set(df.loc[df["source"] == "measured", "model"])
    clash = (df["source"] == "reported") & df["model"].isin(measured)
    if clash.any():
        df.loc[clash, "model"] = df.loc[clash, "model"] + REPORTED_SUFFIX
    return df


def model_meta(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model: its source and claimed length (first non-null value)."""
    meta = df.groupby("model", sort=True).agg(
        source=("source", "first"), claimed_length=("claimed_length", "max")
    )
    meta["claimed_length"] = meta["claimed_length"].round().astype("Int64")
    return meta
