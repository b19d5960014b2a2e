"""Where a training's weights are on disk: the last finished checkpoint to resume from, and the final model published
file by file so that a kill never leaves a directory that looks like a model over torn weights."""

from __future__ import annotations

from pathlib import Path

from ctxbench.harness.core.io import publish_files
from ctxbench.trainers.base import MANIFEST_NAME


def publish_model(staging: Path, out: Path) -> None:
    """Move a saved model from `staging` into `out` file by file (each rename atomic), config.json and then the
    manifest last: a kill during the final save leaves the old files or a directory without config.json, never
    one that looks like a model over torn weights."""
    publish_files(staging, out, last=("config.json", MANIFEST_NAME))


def last_checkpoint(out: Path) -> str | None:
    """The newest checkpoint-N that finished saving (has trainer_state.json); None to start from step 0."""
    found = [(int(p.name.split("-")[-1]), p) for p in out.glob("checkpoint-*")
             if p.name.split("-")[-1].isdigit() and (p / "trainer_state.json").exists()] if out.is_dir() else []
    return str(max(found)[1]) if found else None
