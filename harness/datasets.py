"""Generate a task's samples at one length, cached on disk by everything they depend on."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from filelock import FileLock

from harness.models import cache_dir, tokenizer_fingerprint
from harness.types import Sample

GENERATOR_VERSION = 2  # bump when generation changes, so stale caches are not reused


def dataset_key(task, *, length: int, seed: int, ctx) -> str:
    fp = ctx.cached(("fingerprint",), lambda: tokenizer_fingerprint(ctx.tokenizer))
    parts = {
        "v": GENERATOR_VERSION,
        "task": task.name,
        "args": task.args_json(),
        "length": length,
        "seed": seed,
        "tokenizer": fp,
        "template": ctx.renderer.template,
        "system": ctx.renderer.system,
        "data_dir": str(ctx.data_dir) if ctx.data_dir else None,
        "verify": ctx.verify,
    }
    # a data file named in the args is keyed by its size and mtime too, so an edited file is re-read
    parts["files"] = {k: _stat(v) for k, v in parts["args"].items() if isinstance(v, str) and os.path.exists(v)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _stat(path: str) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def _read(path: Path) -> dict[int, Sample]:
    out: dict[int, Sample] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            s = Sample.from_json(json.loads(line))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a torn last line from a killed process
        out[s.index] = s
    return out


def generate(task, *, length: int, indices: Iterable[int], seed: int, ctx, use_cache: bool = True, on_sample=None) -> list[Sample]:
    """Samples for the given indices, from the cache where present, generated (and cached) otherwise."""
    indices = list(indices)
    if not use_cache:
        return [_one(task, length, i, seed, ctx, on_sample) for i in indices]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", task.name)
    path = cache_dir("datasets") / f"{slug}-{length}-{dataset_key(task, length=length, seed=seed, ctx=ctx)}.jsonl"
    with FileLock(str(path) + ".lock"):
        have = _read(path)
        missing = [i for i in indices if i not in have]
        if missing:
            with open(path, "a", encoding="utf-8") as f:
                if f.tell() and not path.read_bytes().endswith(b"\n"):
                    f.write("\n")
                for i in missing:
                    have[i] = _one(task, length, i, seed, ctx, on_sample)
                    f.write(json.dumps(have[i].to_json()) + "\n")
                f.flush()
                os.fsync(f.fileno())
        elif on_sample:
            for _ in indices:
                on_sample()
    return [have[i] for i in indices]


def _one(task, length, index, seed, ctx, on_sample) -> Sample:
    s = task.generate(length=length, index=index, seed=seed, ctx=ctx)
    if on_sample:
        on_sample()
    return s
