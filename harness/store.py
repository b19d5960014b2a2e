"""The results store: one directory per run, a record, and an append-only samples file.

Each result is one JSON line written with a single write() on an O_APPEND descriptor and fsynced.
A process killed mid-write can leave at most one torn last line; opening the store cuts it off, so
a rerun resumes without duplicates and without corrupt lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.types import SCHEMA_VERSION, RunRecord


class RunStore:
    """A run directory. With `part` (e.g. "shard-0-of-4"), this process appends to its own samples
    file, so shards of one suite run in parallel without sharing a writer; reads merge all parts."""

    def __init__(self, root: Path, run_id: str, part: str | None = None):
        self.dir = Path(root) / run_id
        self.record_path = self.dir / "record.json"
        self.samples_path = self.dir / (f"samples.{part}.jsonl" if part else "samples.jsonl")

    def parts(self) -> list[Path]:
        return sorted(self.dir.glob("samples*.jsonl"))

    def reset(self) -> None:
        """Start this part over (the whole run when unsharded)."""
        if self.samples_path.exists():
            self.samples_path.unlink()

    def write_record(self, record: RunRecord) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(record), indent=2, sort_keys=True))
        os.replace(tmp, self.record_path)

    def read_record(self) -> dict[str, Any]:
        rec = json.loads(self.record_path.read_text())
        if rec.get("schema_version", 0) > SCHEMA_VERSION:
            raise RuntimeError(f"{self.record_path}: written by a newer ctxbench (schema {rec['schema_version']}); upgrade")
        return rec

    def _repair(self) -> None:
        """Drop a torn trailing line left by a killed writer."""
        if not self.samples_path.exists():
            return
        data = self.samples_path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.samples_path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Rows of every part in write order; the last row for an id wins (a rerun of errors appends a fix)."""
        for path in self.parts():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.endswith("\n"):
                        yield json.loads(line)

    def latest(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.rows()}

    def done_ids(self) -> set[str]:
        return {i for i, r in self.latest().items() if not r.get("error")}

    def append(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        blob = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
        fd = os.open(self.samples_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, blob)
            os.fsync(fd)
        finally:
            os.close(fd)

    def open_for_append(self) -> None:
        self._repair()


def list_runs(root: Path) -> list[RunStore]:
    root = Path(root)
    return [RunStore(root, p.parent.name) for p in sorted(root.glob("*/record.json"))]
