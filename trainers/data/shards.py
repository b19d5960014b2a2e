"""Sharded token files plus a manifest: what packers write and trainers stream.

A shard is a .npy int32 array of shape (num_sequences, seq_len), memory-mapped on read so training
streams corpora larger than RAM. The manifest records the method, its config hash, the tokenizer,
token counts and per-sequence provenance summaries; a shard is listed only once it is complete, so
an interrupted synthesis resumes from the last listed shard.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.io import atomic_write

MANIFEST = "manifest.json"


@dataclass
class Manifest:
    method: str
    seq_len: int
    tokenizer: str
    config: dict[str, Any]
    config_hash: str
    shards: list[str] = field(default_factory=list)
    num_sequences: int = 0
    tokens: int = 0
    stats: dict[str, Any] = field(default_factory=dict)  # e.g. docs per sequence, domains, resume cursor
    complete: bool = False
    schema: str = ""  # the synthesis envelope (trainers/data/synthesis.py); "" in manifests written before it
    identity: dict[str, Any] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)

    @property
    def data_hash(self) -> str:
        """The sequences' content (each shard's sha256): the same tokens packed in another directory, from a corpus
        at another path, are the same data. Manifests from before shard hashes keep their config-based hash."""
        content = self.stats.get("shard_sha256", [])
        if self.shards and len(content) == len(self.shards):
            return content_hash(["content", self.seq_len, self.tokens, content])  # lists only: as hashed before
        return content_hash([self.config_hash, self.shards, self.tokens])


def read_manifest(out_dir: Path) -> Manifest | None:
    path = Path(out_dir) / MANIFEST
    return Manifest(**json.loads(path.read_text())) if path.exists() else None


def write_manifest(out_dir: Path, manifest: Manifest) -> None:
    atomic_write(Path(out_dir) / MANIFEST, json.dumps(asdict(manifest), indent=2))


class ShardWriter:
    """Buffers sequences and writes a shard every `shard_size` sequences; resumable via the manifest."""

    def __init__(self, out_dir: Path, manifest: Manifest, shard_size: int = 1024):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest = manifest
        self.shard_size = shard_size
        self.buffer: list[np.ndarray] = []

    def add(self, seq: np.ndarray) -> None:
        if len(seq) != self.manifest.seq_len:
            raise ValueError(f"sequence has {len(seq)} tokens, expected {self.manifest.seq_len}")
        self.buffer.append(np.asarray(seq, dtype=np.int32))
        if len(self.buffer) >= self.shard_size:
            self.flush()

    def flush(self, **stats: Any) -> None:
        """Write buffered sequences as one shard, then list it in the manifest (atomically)."""
        if self.buffer:
            name = f"shard-{len(self.manifest.shards):05d}.npy"
            arr = np.stack(self.buffer)
            atomic_write(self.dir / name, lambda f: np.save(f, arr))
            self.manifest.stats.setdefault("shard_sha256", []).append(hashlib.sha256(arr.tobytes()).hexdigest())
            self.manifest.shards.append(name)
            self.manifest.num_sequences += len(self.buffer)
            self.manifest.tokens += len(self.buffer) * self.manifest.seq_len
            self.buffer = []
        self.manifest.stats.update(stats)
        write_manifest(self.dir, self.manifest)

    def close(self, **stats: Any) -> Manifest:
        self.manifest.complete = True
        self.flush(**stats)
        return self.manifest


def iter_sequences(out_dir: Path) -> Iterator[np.ndarray]:
    """Stream every sequence of a finished (or partial) synthesis, shard by shard, memory-mapped."""
    manifest = read_manifest(out_dir)
    if manifest is None:
        raise FileNotFoundError(f"{out_dir}: no {MANIFEST}; run a packing method first")
    for name in manifest.shards:
        arr = np.load(Path(out_dir) / name, mmap_mode="r")
        yield from arr
