"""Bounded before anything grows: a run's counts (samples, repeats, task-length cells) checked by arithmetic against
what this machine can hold, before a single sample index, id or prompt is built.

A typo (`--samples 1000000000`, `--repeats 1000000000`) used to build a list of a billion sample ids, growing at
~100 MB/s until the machine ran out of memory. Here the counts are multiplied, never materialised: every planned row
costs memory (its index, its id, its place in the done set), a line in samples.jsonl, and every sample a cached
prompt on disk; the largest count that fits all three is named in a one-line refusal. Memory is what is available
now; a disk counts whole (its size, not its free space), so a rerun whose cache and rows are already written is
never refused for a full disk: the bound catches typos, and a full disk during a run is one line of its own. Fixed-item tasks hold fewer
samples than the suite asks for, never more, so the suite's count is an upper bound.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.run.plan_size import available_memory

PLANNED_ROW_BYTES = 256  # memory per planned row: its index, its id string, the done set (measured ~190 B, tracemalloc)
STORED_ROW_BYTES = 512  # a row in samples.jsonl (ids, answers, scores, meta; the prediction on top)
CACHED_BYTES_PER_TOKEN = 5  # a cached prompt: ~4 characters per token, as JSON text
MEMORY_SHARE = 0.5  # the plan's bookkeeping may take at most this share of the memory available now


@dataclass(frozen=True)
class Capacity:
    """What this machine can give a run: bytes of memory available now, the size of the disks under the store and
    under the sample cache."""

    memory: int
    store_disk: int
    cache_disk: int

    @classmethod
    def now(cls, store_dir: Path) -> Capacity:
        cache = Path(os.environ.get("CTXBENCH_CACHE", Path.home() / ".cache" / "ctxbench"))
        return cls(int(available_memory() * MEMORY_SHARE), disk_size(store_dir), disk_size(cache))


def disk_size(path: Path) -> int:
    """Bytes of the file system that `path` (or its nearest existing parent) is on; 0 where unknown."""
    for p in (Path(path).absolute(), *Path(path).absolute().parents):
        if p.exists():
            try:
                return shutil.disk_usage(p).total
            except OSError:
                return 0
    return 0


def largest_samples(lengths: list[int], repeats: int, cap: Capacity) -> int | None:
    """The most samples per task and length that fit (None: unknown, nothing measured)."""
    cells = len(lengths)
    limits = [cap.memory // (PLANNED_ROW_BYTES * cells * repeats) if cap.memory else None,
              cap.store_disk // (STORED_ROW_BYTES * cells * repeats) if cap.store_disk else None,
              cap.cache_disk // (CACHED_BYTES_PER_TOKEN * max(1, sum(lengths))) if cap.cache_disk else None]
    known = [x for x in limits if x is not None]
    return min(known) if known else None


def largest_repeats(lengths: list[int], samples: int, cap: Capacity) -> int | None:
    """The most generations per sample that fit at this sample count (a repeat shares its sample's cached prompt)."""
    rows = len(lengths) * samples
    limits = [cap.memory // (PLANNED_ROW_BYTES * rows) if cap.memory else None,
              cap.store_disk // (STORED_ROW_BYTES * rows) if cap.store_disk else None]
    known = [x for x in limits if x is not None]
    return min(known) if known else None


def check_counts(suite, *, repeats: int = 1, store_dir: Path = Path("runs"), capacity: Capacity | None = None) -> None:
    """Refuse, by arithmetic on the counts alone, a plan larger than the machine holds: one line naming the field
    (--samples, --repeats, --lengths) and the largest value that fits."""
    lengths = [length for spec in suite.tasks for length in (spec.lengths or suite.lengths)]
    if not lengths:
        return
    cap = capacity or Capacity.now(store_dir)
    most = largest_samples(lengths, 1, cap)
    if most is not None and most < 1:
        cells = (cap.memory // PLANNED_ROW_BYTES if cap.memory else 0) or cap.store_disk // STORED_ROW_BYTES
        raise ConfigError(f"--lengths: {len(lengths):,} task-length cells are more than this machine can hold even at one "
                          f"sample each ({_room(cap)}); the most that fit are about {cells:,} cells")
    if most is not None and suite.samples > most:
        raise ConfigError(f"--samples: {suite.samples:,} per task and length ({len(lengths)} task-length cells) is more "
                          f"than this machine can hold ({_room(cap)}); the largest that fits is {max(most, 0):,}")
    most = largest_repeats(lengths, suite.samples, cap)
    if most is not None and repeats > most:
        raise ConfigError(f"--repeats: {repeats:,} generations of {suite.samples:,} samples in {len(lengths)} task-length "
                          f"cells is more than this machine can hold ({_room(cap)}); the largest that fits is {max(most, 0):,}")


def check_generate(samples: int, length: int, capacity: Capacity | None = None) -> None:
    """`ctxbench generate` holds every sample's prompt before it writes the file: refuse more than memory holds."""
    cap = capacity or Capacity.now(Path("."))
    most = cap.memory // ((PLANNED_ROW_BYTES + CACHED_BYTES_PER_TOKEN * length) * 2) if cap.memory else None
    if most is not None and samples > most:
        from ctxbench.harness.run.plan_size import _bytes

        raise ConfigError(f"--samples: {samples:,} prompts of {length:,} tokens are more than this machine can hold "
                          f"(~{_bytes(cap.memory)} of memory); the largest that fits is {max(most, 0):,}")


def _room(cap: Capacity) -> str:
    from ctxbench.harness.run.plan_size import _bytes

    return (f"~{_bytes(cap.memory)} of memory for the plan, a {_bytes(cap.store_disk)} disk under the store, "
            f"a {_bytes(cap.cache_disk)} disk under the sample cache")
