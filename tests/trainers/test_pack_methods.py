"""Packing methods: exact-length framed sequences, SPLICE's no-reuse and orders, retriever quality, mixing."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from ctxbench.trainers.data.corpus import CorpusConfig
from ctxbench.trainers.data.packing import Framer
from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
from ctxbench.trainers.data.shards import read_manifest
from ctxbench.trainers.data.token_cache import load_corpus

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SEQ = 1024


@pytest.fixture(scope="module")
def stdlib_repo(tmp_path_factory) -> Path:
    """A small real code repository: json/, email/, http/ and asyncio/ of the running Python's stdlib."""
    root = tmp_path_factory.mktemp("stdlib")
    for pkg in ("json", "email", "http", "asyncio"):
        shutil.copytree(STDLIB / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.getbasetemp() / "corpus-cache")


@pytest.fixture(scope="module")
def corpus(stdlib_repo, cache, smol_tokenizer):
    return load_corpus(CorpusConfig(path=str(stdlib_repo), max_doc_tokens=512), smol_tokenizer, cache_root=cache)


def pack(tmp_path, tok, stdlib_repo, cache, method, args=None, *, name="out", budget=16 * SEQ, **kw):
    cfg = SynthesisConfig(corpus=CorpusConfig(path=str(stdlib_repo), max_doc_tokens=512), method=method,
                          method_args=args or {}, seq_len=SEQ, budget_tokens=budget, tokenizer="smollm2-135m",
                          out_dir=str(tmp_path / name), shard_size=4, cache_dir=cache, **kw)
    m = synthesize(cfg, tokenizer=tok)
    return m, tmp_path / name


def sequences(out: Path):
    m = read_manifest(out)
    for shard in m.shards:
        arr = np.load(out / shard)
        side = np.load(out / shard.replace(".npy", ".docs.npz"))
        offs = side["offsets"]
        for r in range(len(arr)):
            yield arr[r], side["doc_ids"][offs[r]:offs[r + 1]].tolist(), int(side["source"][r])


def check_framing(seq, ids, corpus, bos, eos):
    """seq is a window of the framed docs [BOS] doc [EOS] ... starting inside the first and ending inside the last."""
    framed = [np.concatenate([[bos], corpus.doc(d), [eos]]) for d in ids]
    stream = np.concatenate(framed)
    if seq[0] == bos:
        start = 0
    else:  # a carried-over remainder of the first document
        start = len(framed[0]) - (int(np.flatnonzero(seq == eos)[0]) + 1)
    assert 0 <= start < len(framed[0])
    assert np.array_equal(seq, stream[start:start + len(seq)])
    assert start + len(seq) > len(stream) - len(framed[-1])  # the last listed document really contributes


METHODS = [
    ("standard", {}, 0.0),
    ("standard", {"carry_over": False}, 0.0),
    ("within_domain", {}, 0.0),
    ("splice", {"retriever": "bm25"}, 0.5),
    ("splice", {"retriever": "repo", "k": 2, "order": "shuffle"}, 0.0),
    ("quest", {}, 0.0),
    ("knn", {"embedder": "hash"}, 0.0),
    ("iclm", {"embedder": "hash", "cluster_size": 5}, 0.25),
]


@pytest.mark.parametrize("method,args,mix", METHODS, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(METHODS)])
def test_every_packer_fills_exact_framed_sequences(tmp_path, smol_tokenizer, stdlib_repo, cache, corpus,
                                                   method, args, mix):
    m, out = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, method, args, mix_ratio=mix, budget=15 * SEQ + 1)
    assert m.complete and m.num_sequences == 16 and m.tokens == 16 * SEQ and len(m.shards) == 4
    seqs = list(sequences(out))
    assert len(seqs) == 16
    bos, eos = smol_tokenizer.bos_token_id, smol_tokenizer.eos_token_id
    for seq, ids, _ in seqs:
        assert seq.shape == (SEQ,) and seq.dtype == np.int32
        check_framing(seq, ids, corpus, bos, eos)
    sources = [s for _, _, s in seqs]
    assert sum(sources) == int(np.floor(16 * mix))  # the standard share of a mix is exact
    assert method in m.stats["methods"] and m.stats["methods"][method]["sequences"] == 16 - sum(sources)


def test_splice_never_reuses_documents(tmp_path, smol_tokenizer, stdlib_repo, cache, corpus):
    budget = int(corpus.num_tokens * 0.6)  # stays inside the first epoch
    m, out = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, "splice", {"retriever": "bm25", "k": 3},
                  budget=budget)
    placed = []
    for _, ids, _ in sequences(out):
        assert len(ids) == len(set(ids)), "a document twice in one sequence"
        placed += ids
    assert len(placed) == len(set(placed)), "a document reused within an epoch"
    assert m.stats["methods"]["splice"]["epochs"] < 1


def _jaccard(corpus, a, b):
    x, y = set(corpus.doc(a).tolist()), set(corpus.doc(b).tolist())
    return len(x & y) / max(1, len(x | y))


def test_bm25_neighbours_beat_random(corpus):
    from ctxbench.trainers.data.retrievers import BM25Retriever

    r = BM25Retriever(corpus)
    rng = np.random.default_rng(0)
    docs = rng.choice(len(corpus), 60, replace=False)
    near = [_jaccard(corpus, d, int(next(iter(r.candidates(int(d))))[0])) for d in docs]
    rand = [_jaccard(corpus, d, int(rng.integers(len(corpus)))) for d in docs]
    assert np.mean(near) > 1.5 * np.mean(rand), (np.mean(near), np.mean(rand))


def test_bm25_scores_equal_bm25s(tmp_path, smol_tokenizer):
    bm25s = pytest.importorskip("bm25s")
    from ctxbench.trainers.data.retrievers import BM25Retriever

    f = tmp_path / "c.jsonl"
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    rng = np.random.default_rng(1)
    f.write_text("".join('{"text": "%s"}\n' % " ".join(rng.choice(words, rng.integers(3, 30))) for _ in range(40)))
    c = load_corpus(CorpusConfig(path=str(f)), smol_tokenizer, cache_root=tmp_path / "cache")
    r = BM25Retriever(c, query_terms=0, query_max_df=1.0)
    docs = [c.doc(i).tolist() for i in range(len(c))]
    vocab = {t: i for i, t in enumerate(sorted({t for d in docs for t in d}))}
    ref = bm25s.BM25()  # the reference index, built by bm25s itself from the same token ids
    ref.index(([[vocab[t] for t in d] for d in docs], vocab), create_empty_token=False, show_progress=False)
    for d in range(len(c)):
        q = r.query(d)
        assert np.allclose(r.scores(q), ref.get_scores([vocab[int(t)] for t in q]), atol=1e-4)


class ToyCorpus:
    """Document i is `size` copies of token 1000 + i."""

    def __init__(self, n, size):
        self.lengths = np.full(n, size, dtype=np.int64)
        self.size = size

    def __len__(self):
        return len(self.lengths)

    def doc(self, i):
        return np.full(self.size, 1000 + i, dtype=np.int32)


class TreeRetriever:
    """A known retrieval tree: d -> 2d+1, 2d+2 (a binary heap)."""

    def candidates(self, d, exclude=None):
        yield np.array([c for c in (2 * d + 1, 2 * d + 2) if c < 15], dtype=np.int64)


@pytest.mark.parametrize("order", ["identity", "reverse", "shuffle"])
def test_splice_tree_orders(order):
    from ctxbench.trainers.data.splice import SplicePacker

    framer = Framer(ToyCorpus(15, 10), seq_len=7 * 12, bos=1, eos=2)  # exactly 7 framed docs fit
    p = SplicePacker(framer, seed=3, retriever=TreeRetriever(), k=2, order=order)
    p.pool._order, p.pool._order_epoch = np.arange(15), 0  # root = document 0
    seq, used = p.next()
    bfs = [0, 1, 2, 3, 4, 5, 6]
    assert [int(t) - 1000 for t in seq if t >= 1000][::10] == used
    if order == "identity":
        assert used == bfs
    elif order == "reverse":
        assert used == bfs[::-1]
    else:
        assert sorted(used) == bfs and used != bfs
    assert p.pool.used[:7].all() and not p.pool.used[7:].any()


def test_standard_carry_over_keeps_every_token(tmp_path, smol_tokenizer, stdlib_repo, cache, corpus):
    from ctxbench.trainers.data.packing import epoch_order

    m, out = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, "standard", budget=12 * SEQ)
    stream = np.concatenate([s for s, _, _ in sequences(out)])
    order = epoch_order(len(corpus), 0, "standard", 0)
    bos, eos = smol_tokenizer.bos_token_id, smol_tokenizer.eos_token_id
    expect = np.concatenate([np.concatenate([[bos], corpus.doc(int(d)), [eos]]) for d in order[:400]])
    assert np.array_equal(stream, expect[:len(stream)])


def test_within_domain_sequences_stay_in_one_domain(tmp_path, smol_tokenizer, stdlib_repo, cache, corpus):
    m, out = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, "within_domain", budget=20 * SEQ)
    seen = set()
    for _, ids, _ in sequences(out):
        doms = {int(corpus.domains[d]) for d in ids}
        assert len(doms) == 1
        seen |= doms
    assert len(seen) > 1


def test_repo_retriever_walks_the_tree(tmp_path, smol_tokenizer):
    from ctxbench.trainers.data.retrievers import RepoRetriever

    root = tmp_path / "r"
    for p in ["a/x1.py", "a/x2.py", "a/b/y1.py", "a/c/z1.py", "d/w1.py", "top.py"]:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_text(f"# {p}\n")
    c = load_corpus(CorpusConfig(path=str(root)), smol_tokenizer, cache_root=tmp_path / "cache")
    paths = c.paths()
    r = RepoRetriever(c)

    def walk(p):
        return [paths[int(i)] for chunk in r.candidates(paths.index(p)) for i in chunk]

    # own directory (rotated to start after the file), its subdirectories, then each ancestor's rest, walking on
    # in depth-first order from the subtree just left and wrapping around
    assert walk("a/x2.py") == ["a/x1.py", "a/b/y1.py", "a/c/z1.py", "d/w1.py", "top.py"]
    assert walk("a/b/y1.py") == ["a/c/z1.py", "a/x1.py", "a/x2.py", "d/w1.py", "top.py"]
    assert walk("top.py") == ["a/x1.py", "a/x2.py", "a/b/y1.py", "a/c/z1.py", "d/w1.py"]


def test_splice_repo_and_bm25_sequences_are_coherent(tmp_path, smol_tokenizer, stdlib_repo, cache, corpus):
    def purity(out):  # share of adjacent documents from the same top-level package
        same = []
        for _, ids, _ in sequences(out):
            same += [corpus.domains[a] == corpus.domains[b] for a, b in zip(ids, ids[1:])]
        return float(np.mean(same))

    _, repo = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, "splice", {"retriever": "repo"}, name="repo")
    _, bm25 = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, "splice", {"retriever": "bm25"}, name="bm25")
    _, std = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, "standard", name="std")
    assert purity(repo) > 0.9
    assert purity(bm25) > purity(std) + 0.1


@pytest.mark.slow
@pytest.mark.parametrize("method", ["splice", "knn", "iclm"])
def test_dense_minilm_methods(tmp_path, smol_tokenizer, stdlib_repo, cache, corpus, method):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("faiss")
    args = {"retriever": "dense", "embedder": "minilm"}
    m, out = pack(tmp_path, smol_tokenizer, stdlib_repo, cache, method, args, budget=8 * SEQ)
    for seq, ids, _ in sequences(out):
        check_framing(seq, ids, corpus, smol_tokenizer.bos_token_id, smol_tokenizer.eos_token_id)


def test_faiss_ivf_table_agrees_with_exact(tmp_path):
    pytest.importorskip("faiss")
    from ctxbench.trainers.data.retrievers import knn_table

    class Where:  # knn_table caches under corpus.dir
        dir, view = tmp_path, 0

    rng = np.random.default_rng(0)
    centers = rng.normal(size=(50, 32))
    x = centers[rng.integers(50, size=6000)] + 0.3 * rng.normal(size=(6000, 32))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    exact = np.asarray(knn_table(Where, x, 5, "exact"))
    approx = np.asarray(knn_table(Where, x, 5, "ivf", exact_below=1000))
    assert not (exact == np.arange(6000)[:, None]).any()  # self excluded
    recall = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(exact, approx)])
    assert recall > 0.9


def test_iclm_over_bm25_neighbours(corpus):
    from ctxbench.trainers.data.baselines import iclm_order, neighbour_table
    from ctxbench.trainers.data.retrievers import BM25Retriever

    knn = neighbour_table(corpus, BM25Retriever(corpus), 9)
    assert (knn[:, :5] >= 0).mean() > 0.95 and not (knn == np.arange(len(corpus))[:, None]).any()
    order, clusters = iclm_order(knn, cluster_size=21, seed=0, epoch=0)
    assert sorted(order.tolist()) == list(range(len(corpus)))  # a path through every document once
    assert clusters < len(corpus) / 5
