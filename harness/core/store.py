"""The results store: one directory per run, a record, and append-only samples files.

Each result is one JSON line written with a single write() on an O_APPEND descriptor and fsynced.
A process killed mid-write can leave at most one torn last line; opening the store cuts it off, so
a rerun resumes without duplicates and without corrupt lines.

One run holds one model, one tokenizer and one writer per part: a lock (with the holder written beside it)
refuses a second writer, and a record whose identity (model and tokenizer fingerprints, prediction-changing
backend arguments, seed, template, suite) differs from the rows already stored refuses to resume. The record's
identity is written once; each invocation adds a session entry with its execution settings and, when it ends,
its end time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import ReadStats, append_jsonl, atomic_write_json, cut_torn_tail, read_jsonl
from ctxbench.harness.core.locks import single_writer
from ctxbench.harness.core.rows import Row
from ctxbench.harness.core.types import SCHEMA_VERSION, RunRecord, run_fingerprint

# Record fields that identify what produced the rows; a resume must match them (sessions, plan may grow).
# Execution settings (threads, batch size, device, ...) are not among them: each session records its own.
IDENTITY = ("model", "backend", "identity_args", "tokenizer_fingerprint", "model_fingerprint", "seed", "template",
            "truncation", "suite_config")


class RunStore:
    """A run directory. With `part` (e.g. "shard-0-of-4"), this process appends to its own samples
    file, so shards of one suite run in parallel without sharing a writer; reads merge all parts."""

    def __init__(self, root: Path, run_id: str, part: str | None = None):
        self.dir = Path(root) / run_id
        self.record_path = self.dir / "record.json"
        self.part = part
        self.samples_path = self.dir / (f"samples.{part}.jsonl" if part else "samples.jsonl")
        self.read_stats = ReadStats()

    def parts(self) -> list[Path]:
        return sorted(self.dir.glob("samples*.jsonl"))

    def reset(self) -> None:
        """Start this part over (the whole run when unsharded)."""
        if self.samples_path.exists():
            self.samples_path.unlink()

    # -- one writer -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def writer(self) -> Iterator[RunStore]:
        """Hold this part's lock while writing; a second writer gets one line naming the holder."""
        if self.record_path.exists():
            self.read_record()  # a garbage record is one line, before the lock file is made
        self.dir.mkdir(parents=True, exist_ok=True)
        with single_writer(self.samples_path.with_suffix(".lock"), what=self.dir.name, noun="this run",
                           fix="wait for it, or split the suite with --shard i/n"):
            cut_torn_tail(self.samples_path)
            yield self

    # -- the record -----------------------------------------------------------------------------
    def begin(self, record: RunRecord, session: dict[str, Any]) -> dict[str, Any]:
        """Write the record of a new run, or check that an existing one has the same identity; then add this
        invocation to its sessions. Returns the record as stored."""
        old = self.read_record() if self.record_path.exists() else None
        new = dataclasses.asdict(record)
        resumed = old is not None and self.has_rows()
        if resumed:
            check_identity(self, new)
            new = {**old, **{k: new[k] for k in ("identity_args", "kind", "plugins") if k not in old},
                   "plan": {**old.get("plan", {}), **new["plan"]}, "schema_version": SCHEMA_VERSION,
                   "external": sorted(set(old.get("external", [])) | set(new["external"]))}
        new["sessions"] = [*old.get("sessions", []), session] if resumed else [session]
        atomic_write_json(self.record_path, new)
        return new

    def end_session(self, session: dict[str, Any], **fields: Any) -> None:
        """Add `fields` (ended, outcome) to this invocation's session entry, found by its start, host and pid."""
        if not self.record_path.exists():
            return
        rec = self.read_record()
        key = tuple(session.get(k) for k in ("started", "host", "pid"))
        for entry in reversed(rec.get("sessions", [])):
            if tuple(entry.get(k) for k in ("started", "host", "pid")) == key:
                entry.update(fields)
                atomic_write_json(self.record_path, rec)
                return

    def read_record(self) -> dict[str, Any]:
        try:
            rec = json.loads(self.record_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{self.record_path}: not a valid run record ({e.__class__.__name__}); "
                              "delete the run directory or restore the file") from None
        if not isinstance(rec, dict) or "run_id" not in rec:
            raise ConfigError(f"{self.record_path}: not a valid run record (no run_id); delete the run directory or restore the file")
        if rec.get("schema_version", 0) > SCHEMA_VERSION:
            raise ConfigError(f"{self.record_path}: written by a newer ctxbench (schema {rec['schema_version']}); upgrade ctxbench")
        return rec

    # -- rows -----------------------------------------------------------------------------------
    def has_rows(self) -> bool:
        return any(p.stat().st_size for p in self.parts())

    def rows(self) -> Iterator[dict[str, Any]]:
        """Rows of every part in write order (corrupt lines skipped, warned about and counted in read_stats), each
        upgraded through Row: a row of an older version has every field of today's (defaults where it lacked one)."""
        for path in self.parts():
            for raw in read_jsonl(path, stats=self.read_stats, require=("id",)):
                yield Row.upgrade(raw)

    def latest(self) -> dict[str, dict[str, Any]]:
        """The last row per sample id: a rerun of errored samples appends the fix."""
        return {r["id"]: r for r in self.rows()}

    def done_ids(self) -> set[str]:
        return {i for i, r in self.latest().items() if not r.get("error")}

    def append(self, rows: Iterable[Row | Mapping[str, Any]]) -> None:
        """The one place rows are written: each writer builds a Row; a mapping (a stored line, a test's) is upgraded
        to today's fields."""
        append_jsonl(self.samples_path, [r.to_json() if isinstance(r, Row) else Row.upgrade(r) for r in rows])

    def open_for_append(self) -> None:
        cut_torn_tail(self.samples_path)


def check_identity(store: RunStore, new: dict[str, Any]) -> None:
    """Refuse, in one line and without writing, a resume whose identity differs from the rows stored. A key the old
    record lacks (an older schema) is not compared; a suite config is compared on the keys the old one has."""
    if not store.record_path.exists():
        return
    old = store.read_record()  # a garbage record is refused here, before anything is written
    if not store.has_rows():
        return
    for key in IDENTITY:
        if key not in old or key not in new or old[key] in ("", None):
            continue
        was = run_fingerprint(str(old.get("backend") or ""), old[key]) if key == "model_fingerprint" else old[key]  # echo
        if not (_covers(was, new[key]) if key == "suite_config" else was == new[key]):
            raise ConfigError(
                f"{store.dir.name}: its rows were scored with a different {key.replace('_', ' ')} "
                f"({_short(old[key])} there, {_short(new[key])} now); pass --fresh to start over, "
                "or --label NAME to score into a new run")


def _covers(old: Any, new: Any) -> bool:
    """old == new, except that a mapping in `new` may hold keys `old` lacks (fields added by a later schema)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(k in new and _covers(v, new[k]) for k, v in old.items())
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_covers(a, b) for a, b in zip(old, new))
    return old == new


def error_reason(error: str) -> str:
    """A short, countable reason for a sample's error: its first clause ('HTTP 503', 'timed out after 10s'),
    after a retry wrapper ('gave up after 3 attempts: ...') if there is one."""
    if error.startswith("gave up after ") and ": " in error:
        error = error.split(": ", 1)[1]
    return error.split(":", 1)[0].strip()[:60] or "error"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


SCORED, TRAINING = "score", "train"  # the kinds of run a store holds


def record_kind(rec: dict[str, Any]) -> str:
    """What wrote a run record: a training ("train", trainers/loop.py) or a scoring ("score"). Records without a
    `kind` (scorings, and trainings older than the field) are told by shape: a training has its trainer and
    config and no suite."""
    kind = rec.get("kind")
    if kind in ("train", "training"):
        return TRAINING
    if kind:
        return str(kind)
    return TRAINING if "trainer" in rec and "config" in rec and "suite_config" not in rec else SCORED


def run_dirs(root: Path, kind: str = SCORED) -> list[Path]:
    """The one reader of a store's run directories: those whose record is of `kind`, sorted by name.

    A record that cannot be read counts as a scored run, so that the scored-run reader refuses it in one line
    (RunStore.read_record) rather than leaving a run silently out."""
    found = []
    for path in sorted(Path(root).glob("*/record.json")):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            rec = None
        readable = isinstance(rec, dict) and "run_id" in rec
        if (record_kind(rec) if readable else SCORED) == kind:
            found.append(path.parent)
    return found


def list_runs(root: Path) -> list[RunStore]:
    """The scored runs of a store (never a training: its checkpoint's manifest is what a scored run records)."""
    return [RunStore(Path(root), d.name) for d in run_dirs(root, SCORED)]
