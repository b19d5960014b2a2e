"""Retrieval baselines from the Quest paper: kNN packing and ICLM (In-Context Pretraining, Shi et al.).

kNN (Guu et al.; Levine et al.): each document, in random order, opens a sequence and its nearest
neighbours follow, best first, until the context is full; a document may recur across sequences,
which is the redundancy Quest criticises. ICLM: a greedy path through the kNN graph (go to the nearest
unvisited of the top knn_k-1 neighbours; jump to a random unvisited document when there is none or
the current cluster reached cluster_size), then clusters smaller than cluster_size are dissolved into
the cluster of each member's nearest outside neighbour, inserted before it; near-duplicate neighbours
(3-gram Jaccard of their first tokens above dedup_threshold) are dropped; the path is concatenated and
chunked. This follows the authors' sort.py (cluster_size 21, knn[1:10]); the dense retriever uses
all-MiniLM-L6-v2 in place of Contriever.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ctxbench.trainers.data.methods import register_method
from ctxbench.trainers.data.packing import DocStream, Packer, StreamPacker, epoch_order


class RetrievalArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    retriever: Literal["dense", "bm25"] = Field("dense", description="neighbour source: dense (embeddings + faiss, "
                                                "Contriever-style) or bm25")
    embedder: Literal["minilm", "hash"] = Field("minilm", description="dense: all-MiniLM-L6-v2 (Contriever stand-in) "
                                                "or hashed TF-IDF of token ids (no model)")
    embed_tokens: int = Field(256, ge=8, description="dense: embed the first N LM tokens of each document")
    query_terms: int = Field(32, ge=0, description="bm25: query with the document's N highest-weighted terms")
    query_max_df: float = Field(0.05, gt=0, le=1, description="bm25: leave terms in more than this fraction of "
                                                             "documents out of queries")


class IclmArgs(RetrievalArgs):
    knn_k: int = Field(10, ge=2, description="neighbours per document in the kNN graph (the path uses the top k-1)")
    cluster_size: int = Field(21, ge=1, description="cap on a path segment before jumping to a random document; "
                                                    "smaller clusters are merged into their neighbours'")
    dedup_threshold: float = Field(0.85, gt=0, le=1.01, description="drop a document whose first-32-token 3-gram "
                                   "Jaccard with the previous one exceeds this (1.01 = off)")


def _retriever(corpus, args: RetrievalArgs):
    from ctxbench.trainers.data.retrievers import make_retriever

    return make_retriever(args.retriever, corpus, query_terms=args.query_terms, query_max_df=args.query_max_df,
                          embedder=args.embedder, embed_tokens=args.embed_tokens)


class KnnPacker(Packer):
    name = "knn"

    def __init__(self, framer, seed: int, retriever):
        super().__init__(framer, seed)
        self.retriever = retriever
        self.roots = DocStream(lambda e: epoch_order(len(framer.corpus), seed, "knn", e), len(framer.corpus))
        self.repeats = 0
        self.seen = np.zeros(len(framer.corpus), dtype=bool)

    def next(self) -> tuple[np.ndarray, list[int]]:
        docs, taken, length = [], set(), 0
        while length < self.framer.seq_len:
            root = self.roots._current()
            self.roots.advance()
            group = [root]
            for chunk in self.retriever.candidates(root):
                group.extend(chunk.tolist())
                if sum(self.framer.framed_len(d) for d in group) >= self.framer.seq_len - length:
                    break
            for d in group:
                if d in taken:
                    continue
                docs.append(d)
                taken.add(d)
                length += self.framer.framed_len(d)
                if length >= self.framer.seq_len:
                    break
        seq, used = self.framer.assemble(docs)
        self.truncated += length - self.framer.seq_len
        self.repeats += int(self.seen[used].sum())
        self.seen[used] = True
        self._count(used)
        return seq, used

    def state(self) -> dict[str, Any]:
        return {**super().state(), "roots": self.roots.state(), "seen": self.seen.copy(), "repeats": self.repeats}

    def load_state(self, st: dict[str, Any]) -> None:
        super().load_state(st)
        self.roots.load_state(st["roots"])
        self.seen, self.repeats = np.asarray(st["seen"], dtype=bool).copy(), st["repeats"]

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "repeated_doc_placements": self.repeats}


def neighbour_table(corpus, retriever, m: int) -> np.ndarray:
    """Top-m neighbours of every document (-1 padded): the dense retriever's faiss table, or one query each."""
    table = getattr(retriever, "table", None)
    if table is not None and table.shape[1] >= m:
        return np.asarray(table[:, :m])
    out = np.full((len(corpus), m), -1, dtype=np.int64)
    for d in range(len(corpus)):
        row: list[int] = []
        for chunk in retriever.candidates(d):
            row += chunk[:m - len(row)].tolist()
            if len(row) == m:
                break
        out[d, :len(row)] = row
    return out


def iclm_order(knn: np.ndarray, cluster_size: int, seed: int, epoch: int) -> tuple[np.ndarray, int]:
    """ICLM's greedy kNN path and small-cluster merge; returns (document order, number of clusters)."""
    n = len(knn)
    perm = epoch_order(n, seed, "iclm", epoch)
    seen = np.zeros(n, dtype=bool)
    cluster_of = np.zeros(n, dtype=np.int64)
    clusters: list[list[int]] = [[]]
    ptr, cur = 0, int(perm[0])
    for _ in range(n):
        seen[cur] = True
        clusters[-1].append(cur)
        cluster_of[cur] = len(clusters) - 1
        nxt = next((int(c) for c in knn[cur] if c >= 0 and not seen[c]), None)
        if nxt is None or len(clusters[-1]) >= cluster_size:
            while ptr < n and seen[perm[ptr]]:
                ptr += 1
            if ptr == n:
                break
            nxt = int(perm[ptr])
            clusters.append([])
        cur = nxt
    for cid in range(len(clusters)):  # merge clusters below the cap into their neighbours' clusters
        if len(clusters[cid]) >= cluster_size:
            continue
        stay = []
        for d in clusters[cid]:
            tgt = next((int(c) for c in knn[d] if c >= 0 and cluster_of[c] != cid), None)
            if tgt is None:
                stay.append(d)
                continue
            home = clusters[cluster_of[tgt]]
            home.insert(home.index(tgt), d)
            cluster_of[d] = cluster_of[tgt]
        clusters[cid] = stay
    kept = [c for c in clusters if c]
    return np.fromiter((d for c in kept for d in c), dtype=np.int64, count=n), len(kept)


def _dedup(order: np.ndarray, corpus, threshold: float) -> tuple[np.ndarray, int]:
    if threshold > 1:
        return order, 0
    keep, prev = [], None
    for d in order.tolist():
        t = corpus.doc(d)[:32].tolist()
        grams = set(zip(t, t[1:], t[2:]))
        if prev is not None and grams and len(grams & prev) / len(grams | prev) > threshold:
            continue
        keep.append(d)
        prev = grams
    return np.asarray(keep, dtype=np.int64), len(order) - len(keep)


class IclmPacker(StreamPacker):
    name = "iclm"

    def __init__(self, framer, seed: int, knn: np.ndarray, args: IclmArgs):
        self.knn, self.args, self.info = knn, args, {}
        super().__init__(framer, seed, carry_over=True, order_fn=self._order)

    def _order(self, epoch: int) -> np.ndarray:
        order, nclusters = iclm_order(self.knn, self.args.cluster_size, self.seed, epoch)
        order, dropped = _dedup(order, self.framer.corpus, self.args.dedup_threshold)
        self.info = {"clusters": nclusters, "near_duplicates_dropped": dropped}
        return order

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), **self.info}


@register_method("knn", RetrievalArgs)
def build_knn(*, framer, args: RetrievalArgs, seed: int, **_):
    """kNN packing: each document followed by its nearest neighbours (documents may recur)."""
    return KnnPacker(framer, seed, _retriever(framer.corpus, args))


@register_method("iclm", IclmArgs)
def build_iclm(*, framer, args: IclmArgs, seed: int, **_):
    """ICLM: a greedy path through the kNN graph with a cluster-size cap, concatenated and chunked."""
    knn = neighbour_table(framer.corpus, _retriever(framer.corpus, args), args.knn_k - 1)
    return IclmPacker(framer, seed, knn, args)
