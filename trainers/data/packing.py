"""Sequence assembly shared by every method, plus the two baselines that need no retrieval.

A document enters a sequence framed as [BOS] doc [EOS] (EOS only when the tokenizer has no BOS).
Every sequence is exactly seq_len tokens: the last document is truncated to fill it. Streaming
packers (standard, within-domain, ICLM) carry the cut-off remainder into the next sequence, as
concatenate-then-chunk does; structured packers drop it (the remainder has no related neighbours).
Packers keep their whole position in `state()`, so an interrupted synthesis resumes exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ctxbench.harness.core.io import atomic_write


class Framer:
    """Writes framed documents into fixed-length buffers."""

    def __init__(self, corpus, seq_len: int, bos: int | None, eos: int):
        self.corpus, self.seq_len, self.bos, self.eos = corpus, seq_len, bos, eos
        self.nsep = 2 if bos is not None else 1
        self.head = 1 if bos is not None else 0

    def framed_len(self, doc: int) -> int:
        return int(self.corpus.lengths[doc]) + self.nsep

    def write(self, buf: np.ndarray, at: int, doc: int, start: int = 0) -> int:
        """Copy framed doc[start:] into buf[at:] (as much as fits); return the number of tokens written."""
        toks = self.corpus.doc(doc)
        n, room = len(toks) + self.nsep, len(buf) - at
        count = min(n - start, room)
        end = start + count
        i = at
        if self.head and start == 0:
            buf[i] = self.bos
            i += 1
        lo, hi = max(start - self.head, 0), min(end - self.head, len(toks))
        if hi > lo:
            buf[i:i + hi - lo] = toks[lo:hi]
            i += hi - lo
        if end == n:
            buf[i] = self.eos
        return count

    def assemble(self, docs: list[int]) -> tuple[np.ndarray, list[int]]:
        """Concatenate framed docs and truncate to seq_len; returns the sequence and the docs that made it in."""
        buf = np.empty(self.seq_len, dtype=np.int32)
        at, used = 0, []
        for d in docs:
            if at >= self.seq_len:
                break
            at += self.write(buf, at, d)
            used.append(d)
        if at < self.seq_len:
            raise ValueError(f"documents fill {at} of {self.seq_len} tokens")
        return buf, used


def epoch_order(n: int, seed: int, salt: str, epoch: int) -> np.ndarray:
    """A fresh random order of n items per epoch, reproducible from (seed, salt, epoch) alone."""
    key = [seed, int.from_bytes(salt.encode()[:8].ljust(8, b"\0"), "little"), epoch]
    return np.random.default_rng(key).permutation(n).astype(np.int64)


class DocStream:
    """An endless stream of documents, epoch after epoch, chunked with carry-over into sequences."""

    def __init__(self, order_fn, n: int):
        self.order_fn, self.n = order_fn, n
        self.epoch, self.pos, self.offset = 0, 0, 0
        self._order, self._order_epoch = None, -1

    def _current(self) -> int:
        if self._order_epoch != self.epoch:
            self._order, self._order_epoch = self.order_fn(self.epoch), self.epoch
        return int(self._order[self.pos])

    def fill(self, framer: Framer, buf: np.ndarray, at: int = 0) -> list[int]:
        docs = []
        while at < len(buf):
            d = self._current()
            wrote = framer.write(buf, at, d, self.offset)
            docs.append(d)
            at += wrote
            if self.offset + wrote == framer.framed_len(d):
                self.offset = 0
                self.advance()
            else:
                self.offset += wrote
        return docs

    def advance(self) -> None:
        """Move past the current document (orders may differ in length between epochs, e.g. ICLM's dedup)."""
        self._current()
        self.offset, self.pos = 0, self.pos + 1
        if self.pos >= len(self._order):
            self.epoch, self.pos = self.epoch + 1, 0

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos, "offset": self.offset}

    def load_state(self, st: dict[str, Any]) -> None:
        self.epoch, self.pos, self.offset = int(st["epoch"]), int(st["pos"]), int(st["offset"])


class Packer:
    """Base: next() returns (sequence, doc ids in it); state()/load_state() make it resumable.

    `continued` says whether the last sequence began with the rest of a document cut off in an earlier one
    (carry-over packers); that document id is then a continuation, not a second placement.
    """

    name = "packer"
    continued = False

    def __init__(self, framer: Framer, seed: int):
        self.framer, self.seed = framer, seed
        self.rng = np.random.default_rng(seed)
        self.sequences, self.docs_placed, self.truncated = 0, 0, 0

    def next(self) -> tuple[np.ndarray, list[int]]:
        raise NotImplementedError

    def _count(self, docs: list[int]) -> None:
        self.sequences += 1
        self.docs_placed += len(docs)

    def state(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "sequences": self.sequences, "docs_placed": self.docs_placed,
                "truncated": self.truncated}

    def load_state(self, st: dict[str, Any]) -> None:
        self.rng.bit_generator.state = st["rng"]
        self.sequences, self.docs_placed, self.truncated = st["sequences"], st["docs_placed"], st["truncated"]

    def summary(self) -> dict[str, Any]:
        return {"sequences": self.sequences, "docs_per_sequence": round(self.docs_placed / max(self.sequences, 1), 3),
                "dropped_remainder_tokens": self.truncated}


class StreamPacker(Packer):
    """Standard example packing: documents in random order (new order each epoch), concatenated, chunked."""

    name = "standard"

    def __init__(self, framer: Framer, seed: int, carry_over: bool = True, order_fn=None):
        super().__init__(framer, seed)
        n = len(framer.corpus)
        self.stream = DocStream(order_fn or (lambda e: epoch_order(n, seed, self.name, e)), n)
        self.carry_over = carry_over

    def next(self) -> tuple[np.ndarray, list[int]]:
        buf = np.empty(self.framer.seq_len, dtype=np.int32)
        self.continued = self.stream.offset > 0
        docs = self.stream.fill(self.framer, buf)
        if not self.carry_over and self.stream.offset:
            self.truncated += self.framer.framed_len(docs[-1]) - self.stream.offset
            self.stream.advance()
        self._count(docs)
        return buf, docs

    def state(self) -> dict[str, Any]:
        return {**super().state(), "stream": self.stream.state()}

    def load_state(self, st: dict[str, Any]) -> None:
        super().load_state(st)
        self.stream.load_state(st["stream"])

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "epochs": round(self.stream.epoch + self.stream.pos / max(self.stream.n, 1), 4)}


class WithinDomainPacker(Packer):
    """Within-domain packing: each sequence draws random documents of one domain (chosen by token share)."""

    name = "within_domain"

    def __init__(self, framer: Framer, seed: int, carry_over: bool = True):
        super().__init__(framer, seed)
        corpus = framer.corpus
        codes = np.unique(corpus.domains)
        self.codes = codes
        self.members = [np.flatnonzero(corpus.domains == c) for c in codes]
        weights = np.array([corpus.lengths[m].sum() + framer.nsep * len(m) for m in self.members], dtype=np.float64)
        self.p = weights / weights.sum()
        self.streams = [DocStream(self._order_fn(i), len(m)) for i, m in enumerate(self.members)]
        self.carry_over = carry_over
        self.by_domain = np.zeros(len(codes), dtype=np.int64)

    def _order_fn(self, i: int):
        members = self.members[i]
        return lambda e: members[epoch_order(len(members), self.seed, f"dom{i}", e)]

    def next(self) -> tuple[np.ndarray, list[int]]:
        i = int(self.rng.choice(len(self.codes), p=self.p))
        s = self.streams[i]
        buf = np.empty(self.framer.seq_len, dtype=np.int32)
        self.continued = s.offset > 0
        docs = s.fill(self.framer, buf)
        if not self.carry_over and s.offset:
            self.truncated += self.framer.framed_len(docs[-1]) - s.offset
            s.advance()
        self.by_domain[i] += 1
        self._count(docs)
        return buf, docs

    def state(self) -> dict[str, Any]:
        return {**super().state(), "streams": [s.state() for s in self.streams], "by_domain": self.by_domain.tolist()}

    def load_state(self, st: dict[str, Any]) -> None:
        super().load_state(st)
        for s, x in zip(self.streams, st["streams"]):
            s.load_state(x)
        self.by_domain = np.asarray(st["by_domain"], dtype=np.int64)

    def summary(self) -> dict[str, Any]:
        names = self.framer.corpus.domain_names
        return {**super().summary(), "sequences_by_domain": {names[c]: int(n) for c, n in zip(self.codes, self.by_domain)}}


class Mixer(Packer):
    """Interleaves a structured packer with standard packing: exactly floor(i * ratio) of the first i sequences
    are standard (deterministic, so the mix holds in every prefix and on resume)."""

    def __init__(self, main: Packer, standard: Packer, ratio: float):
        self.main, self.standard, self.ratio, self.i = main, standard, ratio, 0
        self.name = main.name

    def next_source(self) -> int:
        return int(np.floor((self.i + 1) * self.ratio) - np.floor(self.i * self.ratio))

    def next(self) -> tuple[np.ndarray, list[int]]:
        src = self.next_source()
        self.i += 1
        self.last = self.standard if src else self.main
        return self.last.next()

    @property
    def continued(self) -> bool:
        return bool(getattr(self, "last", None) and self.last.continued)

    def state(self) -> dict[str, Any]:
        return {"i": self.i, "main": self.main.state(), "standard": self.standard.state()}

    def load_state(self, st: dict[str, Any]) -> None:
        self.i = st["i"]
        self.main.load_state(st["main"])
        self.standard.load_state(st["standard"])

    def summary(self) -> dict[str, Any]:
        return {self.main.name: self.main.summary(), "standard (mix)": self.standard.summary()}


def save_state(path: Path, st: dict[str, Any]) -> None:
    """JSON for scalars and small lists; arrays (e.g. SPLICE's used-document mask) go into an .npz beside it."""
    arrays: dict[str, np.ndarray] = {}

    def strip(x, key):
        if isinstance(x, np.ndarray):
            arrays[key] = x
            return {"__array__": key}
        if isinstance(x, dict):
            return {k: strip(v, f"{key}.{k}") for k, v in x.items()}
        if isinstance(x, list):
            return [strip(v, f"{key}.{i}") for i, v in enumerate(x)]
        return x

    doc = strip(st, "s")
    atomic_write(path, lambda f: np.savez(f, __json__=np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8), **arrays))


def load_state(path: Path) -> dict[str, Any]:
    with np.load(path) as z:
        doc = json.loads(bytes(z["__json__"]).decode())

        def fill(x):
            if isinstance(x, dict):
                return z[x["__array__"]].copy() if set(x) == {"__array__"} else {k: fill(v) for k, v in x.items()}
            if isinstance(x, list):
                return [fill(v) for v in x]
            return x

        return fill(doc)
