"""A task's samples at one length, streamed from (and appended to) an on-disk cache keyed by what they depend on.

The cache is one JSON-lines file per (task, args, length, seed, tokenizer, template, data): read line by line,
never whole, so memory does not grow with the number of samples. Generated samples are appended one line at a
time under a short lock (shards of one run may generate disjoint indices of the same file concurrently). A torn
or corrupt line is skipped with a warning and its sample regenerated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from filelock import FileLock

from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.io import append_jsonl, cut_torn_tail, read_jsonl, slug
from ctxbench.harness.core.models import cache_dir, file_digest, tokenizer_fingerprint
from ctxbench.harness.core.types import Sample

GENERATOR_VERSION = 4  # bump when generation or the cached format changes, so stale caches are not reused


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
        **(ctx.renderer.key() if hasattr(ctx.renderer, "key") else {}),  # thinking mode (no answer prefix)
        "data_dir": str(ctx.data_dir) if ctx.data_dir else None,
        "verify": ctx.verify,
    }
    # the data files the task reads, by content: replacing every essay under the same path gives new samples
    parts["files"] = data_fingerprint(task, ctx)
    return content_hash(parts)


def data_fingerprint(task, ctx) -> dict[str, str]:
    """Path -> content digest of every data file the task reads (its `data_files` hook)."""
    files = task.data_files(ctx)
    return {str(p): file_digest(p) for p in sorted({Path(f) for f in files})}


def cache_path(task, *, length: int, seed: int, ctx) -> Path:
    return cache_dir("datasets") / f"{slug(task.name, max_len=80)}-{length}-{dataset_key(task, length=length, seed=seed, ctx=ctx)}.jsonl"


def iter_samples(task, *, length: int, indices: Iterable[int], seed: int, ctx, use_cache: bool = True,
                 on_sample=None) -> Iterator[Sample]:
    """Samples for `indices`: cached ones first (in file order), then the missing ones, generated and cached.

    Each index is yielded exactly once. Only the sample being yielded is held in memory.
    """
    wanted = list(dict.fromkeys(indices))
    if not use_cache:
        for i in wanted:
            yield _one(task, length, i, seed, ctx, on_sample)
        return
    path = cache_path(task, length=length, seed=seed, ctx=ctx)
    todo = set(wanted)
    if path.exists():
        for row in read_jsonl(path, require=("index", "prompt")):
            i = row["index"]
            if i in todo:
                todo.discard(i)
                if on_sample:
                    on_sample()
                yield Sample.from_json(row)
    lock = FileLock(str(path) + ".lock")
    for i in wanted:
        if i in todo:
            s = _one(task, length, i, seed, ctx, on_sample)
            with lock:
                cut_torn_tail(path)
                append_jsonl(path, [s.to_json()])
            yield s


def generate(task, *, length: int, indices: Iterable[int], seed: int, ctx, use_cache: bool = True, on_sample=None) -> list[Sample]:
    """Samples for the given indices, in that order (a list: for small sets such as `ctxbench generate`)."""
    indices = list(indices)
    got = {s.index: s for s in iter_samples(task, length=length, indices=indices, seed=seed, ctx=ctx, use_cache=use_cache,
                                            on_sample=on_sample)}
    return [got[i] for i in indices]


def _one(task, length, index, seed, ctx, on_sample) -> Sample:
    s = task.generate(length=length, index=index, seed=seed, ctx=ctx)
    if on_sample:
        on_sample()
    return s
