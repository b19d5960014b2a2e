"""SPLICE (Staniszewski et al. 2025, Algorithm 1): sequences of mutually related documents.

From a random unused root, a tree grows breadth-first: each popped document d adds RETRIEVE(d, k),
the top-k documents most similar to d among those still in the corpus (used documents are skipped,
so a document appears once per epoch and never twice in a sequence), until the documents fill the
context. The tree is flattened in identity (BFS), reverse or shuffled order, concatenated and cut to
seq_len. Two choices the paper leaves open: when the queue empties before the context is full, a new
random root starts another tree in the same sequence; documents collected but entirely past the cut
are returned to the corpus. `noise` reproduces the paper's noisy retriever (Table 7).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ctxbench.trainers.data.methods import register_method
from ctxbench.trainers.data.packing import Packer, epoch_order


class RootPool:
    """Unused documents of the current epoch, drawn in a per-epoch random order; resets when exhausted."""

    def __init__(self, n: int, seed: int, salt: str):
        self.n, self.seed, self.salt = n, seed, salt
        self.used = np.zeros(n, dtype=bool)
        self.epoch, self.ptr, self.n_used = 0, 0, 0
        self._order, self._order_epoch = None, -1

    def mark(self, d: int) -> None:
        self.used[d] = True
        self.n_used += 1

    def unmark(self, d: int) -> None:
        self.used[d] = False
        self.n_used -= 1
        self.ptr = 0 if self._order is None else min(self.ptr, int(np.flatnonzero(self._order == d)[0]))

    def root(self, keep: set[int]) -> int:
        """A random unused document; a new epoch (everything unused again, except `keep`) when none is left."""
        if self.n_used >= self.n:
            self.used[:] = False
            self.used[list(keep)] = True
            self.epoch, self.ptr, self.n_used = self.epoch + 1, 0, len(keep)
            if self.n_used >= self.n:
                raise ValueError("every document is already in this sequence")
        if self._order_epoch != self.epoch:
            self._order, self._order_epoch = epoch_order(self.n, self.seed, self.salt, self.epoch), self.epoch
        while self.used[self._order[self.ptr]]:
            self.ptr += 1
        return int(self._order[self.ptr])

    def state(self) -> dict[str, Any]:
        return {"used": self.used.copy(), "epoch": self.epoch, "ptr": self.ptr, "n_used": self.n_used}

    def load_state(self, st: dict[str, Any]) -> None:
        self.used = np.asarray(st["used"], dtype=bool).copy()
        self.epoch, self.ptr, self.n_used = int(st["epoch"]), int(st["ptr"]), int(st["n_used"])


def flatten(docs: list[int], order: str, rng: np.random.Generator) -> list[int]:
    """ORDER(C): identity keeps breadth-first order, reverse flips it, shuffle permutes it at random."""
    if order == "reverse":
        return docs[::-1]
    if order == "shuffle":
        return [docs[i] for i in rng.permutation(len(docs))]
    return list(docs)


class SplicePacker(Packer):
    name = "splice"

    def __init__(self, framer, seed: int, retriever, *, k: int = 1, order: str = "identity", noise: float = 0.0):
        super().__init__(framer, seed)
        self.retriever, self.k, self.order, self.noise = retriever, k, order, noise
        self.pool = RootPool(len(framer.corpus), seed, "splice")
        self.trees, self.retrieved, self.starved = 0, 0, 0

    def retrieve(self, d: int, taken: set[int]) -> list[int]:
        """Top-k unused documents most similar to d (fewer when the retriever runs out)."""
        out: list[int] = []
        if self.noise and self.rng.random() < self.noise:
            return [self.pool.root(taken)]
        for chunk in self.retriever.candidates(d, exclude=self.pool.used):
            for c in chunk.tolist():
                if c not in taken and not self.pool.used[c]:
                    out.append(c)
                    if len(out) == self.k:
                        return out
        return out

    def collect(self) -> list[int]:
        """Algorithm 1: BFS trees of related documents until their framed length reaches seq_len."""
        docs: list[int] = []
        taken: set[int] = set()
        length = 0
        while length < self.framer.seq_len:
            root = self.pool.root(taken)
            self.trees += 1
            queue = deque([root])
            self.pool.mark(root)
            docs.append(root)
            taken.add(root)
            length += self.framer.framed_len(root)
            while queue and length < self.framer.seq_len:
                d = queue.popleft()
                found = self.retrieve(d, taken)
                self.retrieved += len(found)
                self.starved += len(found) < self.k
                for c in found:
                    self.pool.mark(c)
                    docs.append(c)
                    taken.add(c)
                    queue.append(c)
                    length += self.framer.framed_len(c)
        return docs

    def next(self) -> tuple[np.ndarray, list[int]]:
        docs = flatten(self.collect(), self.order, self.rng)
        seq, used = self.framer.assemble(docs)
        self.truncated += sum(self.framer.framed_len(d) for d in used) - self.framer.seq_len
        for d in docs[len(used):]:  # collected but past the cut: back to the corpus
            self.pool.unmark(d)
        self._count(used)
        return seq, used

    def state(self) -> dict[str, Any]:
        return {**super().state(), "pool": self.pool.state(), "trees": self.trees, "retrieved": self.retrieved,
                "starved": self.starved}

    def load_state(self, st: dict[str, Any]) -> None:
        super().load_state(st)
        self.pool.load_state(st["pool"])
        self.trees, self.retrieved, self.starved = st["trees"], st["retrieved"], st["starved"]

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "trees_per_sequence": round(self.trees / max(self.sequences, 1), 3),
                "retrievals_short_of_k": self.starved, "epochs": round(self.pool.epoch + self.pool.n_used /
                                                                       self.pool.n, 4)}


class SpliceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    retriever: Literal["bm25", "dense", "repo"] = Field("bm25", description="RETRIEVE: bm25 (bm25s scoring over LM "
                                                        "token ids), dense (embeddings + faiss) or repo (directory tree)")
    k: int = Field(1, ge=1, description="documents retrieved per tree node (paper default 1: a path of related docs)")
    order: Literal["identity", "reverse", "shuffle"] = Field("identity", description="flattening order of the tree")
    noise: float = Field(0.0, ge=0, le=1, description="probability that RETRIEVE returns a random unused document "
                                                      "instead (the paper's noisy-retriever study)")
    bm25_k1: float = Field(1.5, gt=0, description="BM25 k1")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 b")
    query_terms: int = Field(32, ge=0, description="bm25: query with the document's N highest-weighted terms (0 = all)")
    query_max_df: float = Field(0.05, gt=0, le=1, description="bm25: leave terms found in more than this fraction of "
                                                             "documents out of queries (1 = keep all)")
    embedder: Literal["minilm", "hash"] = Field("minilm", description="dense: all-MiniLM-L6-v2 (Contriever stand-in) "
                                                "or hashed TF-IDF of token ids (no model)")
    embed_tokens: int = Field(256, ge=8, description="dense: embed the first N LM tokens of each document")


@register_method("splice", SpliceArgs)
def build_splice(*, framer, args: SpliceArgs, seed: int, **_):
    """SPLICE: BFS trees of retrieved related documents, flattened in identity/reverse/shuffle order."""
    from ctxbench.trainers.data.retrievers import make_retriever

    r = make_retriever(args.retriever, framer.corpus, k1=args.bm25_k1, b=args.bm25_b, query_terms=args.query_terms,
                       query_max_df=args.query_max_df, embedder=args.embedder, embed_tokens=args.embed_tokens)
    return SplicePacker(framer, seed, r, k=args.k, order=args.order, noise=args.noise)
