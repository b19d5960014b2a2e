"""What a packing method did to the data: the numbers the SPLICE and Quest papers use to explain results.

Per method (and for the standard-packing share of a mix, separately): tokens, documents per sequence,
domain mix, burstiness as Zipf's coefficient of token frequency (SPLICE Table 9: per sequence, the
least-squares slope of log frequency against log rank over the tokens present; lower = burstier;
mean and std over sampled sequences), mean pairwise similarity of the documents within a sequence
(Quest Figure 7; TF-IDF cosine over token ids by default, all-MiniLM-L6-v2 cosine with embed='minilm'),
and duplicate rates. Documents are recovered by splitting sequences at the BOS/EOS separators
(documents never contain them: ingestion encodes special-token text as text).

duplicate_rate counts documents placed more than once: a document that concatenate-and-chunk packing
continues across a sequence boundary is one placement, not a duplicate (the side files record which
sequences start with such a continuation; older packings without that record are read by the rule
"the first document of a sequence continues the last document of the previous sequence of its source").
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ctxbench.trainers.data.shards import read_manifest


def zipf_coefficient(seq: np.ndarray) -> float:
    counts = np.sort(np.bincount(np.asarray(seq, dtype=np.int64)))[::-1]
    counts = counts[counts > 0]
    if len(counts) < 3:
        return float("nan")
    ranks = np.arange(1, len(counts) + 1)
    slope = np.polyfit(np.log(ranks), np.log(counts), 1)[0]
    return float(-slope)


def split_docs(seq: np.ndarray, seps: set[int], min_tokens: int = 8) -> list[np.ndarray]:
    cut = np.flatnonzero(np.isin(seq, list(seps)))
    pieces = np.split(np.asarray(seq), cut)
    return [p[1:] if len(p) and p[0] in seps else p for p in pieces if len(p) - (len(p) and p[0] in seps) >= min_tokens]


def _tfidf_sims(groups: list[list[np.ndarray]]) -> list[float]:
    """Mean pairwise cosine of TF-IDF vectors (token ids, idf over every sampled document) per sequence."""
    from scipy.sparse import csr_matrix

    docs = [d for g in groups for d in g]
    if not docs:
        return []
    rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    cols = np.concatenate(docs).astype(np.int64)
    m = csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(docs), int(cols.max()) + 1))
    m.sum_duplicates()
    df = np.bincount(m.indices, minlength=m.shape[1])
    m.data = np.log1p(m.data) * np.log((1 + len(docs)) / (1 + df[m.indices]))
    norms = np.sqrt(np.asarray(m.multiply(m).sum(1)).ravel())
    norms[norms == 0] = 1
    out, at = [], 0
    for g in groups:
        block = m[at:at + len(g)]
        at += len(g)
        if len(g) < 2:
            continue
        sim = (block @ block.T).toarray() / np.outer(norms[at - len(g):at], norms[at - len(g):at])
        out.append(float(sim[np.triu_indices(len(g), 1)].mean()))
    return out


def _minilm_sims(groups: list[list[np.ndarray]], tokenizer_spec: str) -> list[float]:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.trainers.data.retrievers import minilm_path

    tok = load_tokenizer(tokenizer_spec)
    model = SentenceTransformer(minilm_path(), device="cpu")
    out = []
    for g in groups:
        if len(g) < 2:
            continue
        texts = tok.backend_tokenizer.decode_batch([d[:256].tolist() for d in g])
        e = model.encode(texts, normalize_embeddings=True, show_progress_bar=False)
        sim = e @ e.T
        out.append(float(sim[np.triu_indices(len(g), 1)].mean()))
    return out


def _stats(xs: list[float]) -> dict[str, float] | None:
    xs = [x for x in xs if x == x]
    return {"mean": round(float(np.mean(xs)), 4), "std": round(float(np.std(xs)), 4), "n": len(xs)} if xs else None


def inspect(out_dir: str | Path, *, sample: int = 256, seed: int = 0, embed: str = "tfidf") -> dict[str, Any]:
    """Diagnostics of one synthesis directory, keyed by method (and 'standard (mix)' for a mixed run)."""
    out = Path(out_dir)
    m = read_manifest(out)
    if m is None:
        from ctxbench.harness.core.errors import ConfigError

        raise ConfigError(f"SHARDS: {out} has no manifest.json; run `ctxbench data pack` first")
    seps = {v for v in m.stats.get("separators", {}).values() if v is not None}
    labels = {0: m.method, 1: "standard (mix)"}
    per, seq_index, hashes = _tally(out, m)
    rng = np.random.default_rng(seed)
    report: dict[str, Any] = {}
    for s, p in sorted(per.items()):
        mine = [x for x in seq_index if x[2] == s]
        pick = sorted(rng.choice(len(mine), size=min(sample, len(mine)), replace=False).tolist())
        seqs = [np.load(out / m.shards[mine[i][0]], mmap_mode="r")[mine[i][1]] for i in pick]
        groups = [split_docs(q, seps) for q in seqs]
        sims = _minilm_sims(groups, m.tokenizer) if embed == "minilm" else _tfidf_sims(groups)
        report[labels[s]] = _source_report(p, m, seqs, sims=sims, embed=embed, seq_hashes=hashes[s])
    return {"dir": str(out), "method": m.method, "seq_len": m.seq_len, "complete": m.complete,
            "config_hash": m.config_hash, "stats": m.stats.get("methods", {}), "report": report}


def _tally(out: Path, m) -> tuple[dict[int, dict[str, Any]], list[tuple[int, int, int]], dict[int, Counter]]:
    """One pass over every shard's side file: per source (0 the method, 1 the mix) its documents, domains and
    duplicates; every sequence's (shard, row, source); and each source's sequence hashes."""
    per: dict[int, dict[str, Any]] = {}
    seq_index: list[tuple[int, int, int]] = []  # (shard, row, source)
    hashes: dict[int, Counter] = {}
    last_doc: dict[int, int] = {}  # source -> last document of its previous sequence (older side files)
    for si, shard in enumerate(m.shards):
        side = np.load(out / shard.replace(".npy", ".docs.npz"))
        offs, ids, doms, src = side["offsets"], side["doc_ids"], side["domains"], side["source"]
        cont = side["continued"] if "continued" in side.files else None
        arr = np.load(out / shard, mmap_mode="r")
        for r in range(len(src)):
            s = int(src[r])
            p = per.setdefault(s, {"sequences": 0, "docs": [], "doc_ids": [], "domains": Counter(), "within_dups": 0,
                                   "doms_per_seq": []})
            d = ids[offs[r]:offs[r + 1]]
            continues = bool(cont[r]) if cont is not None else (len(d) > 0 and last_doc.get(s) == int(d[0]))
            if len(d):
                last_doc[s] = int(d[-1])
            p["sequences"] += 1
            p["docs"].append(len(d))
            p["doc_ids"].append(d[1:] if continues else d)  # placements: a continuation is not a new one
            p["within_dups"] += len(d) - len(np.unique(d))
            p["domains"].update(doms[offs[r]:offs[r + 1]].tolist())
            p["doms_per_seq"].append(len(np.unique(doms[offs[r]:offs[r + 1]])))
            hashes.setdefault(s, Counter())[hash(arr[r].tobytes())] += 1
            seq_index.append((si, r, s))
    return per, seq_index, hashes


def _source_report(p: dict[str, Any], m, seqs: list, *, sims: list[float], embed: str, seq_hashes: Counter) -> dict[str, Any]:
    """One source's counts: documents per sequence, domains, Zipf fit and similarity of the sampled sequences,
    duplicates."""
    names = m.stats.get("domain_names", [])
    all_ids = np.concatenate(p["doc_ids"]) if p["doc_ids"] else np.zeros(0)
    placements = len(all_ids)
    total_dom = sum(p["domains"].values()) or 1
    return {
        "sequences": p["sequences"], "tokens": p["sequences"] * m.seq_len,
        "docs_per_sequence": {"mean": round(float(np.mean(p["docs"])), 3), "median": float(np.median(p["docs"])),
                              "p90": float(np.percentile(p["docs"], 90))},
        "domains": {(names[k] if k < len(names) else str(k)) or "(none)": round(v / total_dom, 4)
                    for k, v in p["domains"].most_common(8)},
        "domains_per_sequence": round(float(np.mean(p["doms_per_seq"])), 3),
        "zipf": _stats([zipf_coefficient(q) for q in seqs]),
        "doc_similarity": _stats(sims),
        "similarity_measure": "minilm cosine" if embed == "minilm" else "tf-idf cosine (token ids)",
        "duplicate_rate": round(1 - len(np.unique(all_ids)) / placements, 4) if placements else 0.0,
        "within_sequence_duplicates": p["within_dups"],
        "duplicate_sequences": int(sum(c - 1 for c in seq_hashes.values())),
    }


def table(reports: list[dict[str, Any]]):
    """A rich table: one column per (directory, method) and one row per metric."""
    from rich.table import Table

    cols = [(r["dir"], label, v) for r in reports for label, v in r["report"].items()]
    t = Table(title="packed data diagnostics")
    t.add_column("metric")
    for d, label, _ in cols:
        t.add_column(f"{label}\n{Path(d).name}", justify="right")

    def fmt(x):
        if isinstance(x, dict) and "mean" in x:
            return f"{x['mean']:.3f} ± {x.get('std', 0):.3f}" if "std" in x else f"{x['mean']:.2f}"
        if isinstance(x, dict):
            return ", ".join(f"{k}: {v:.0%}" for k, v in list(x.items())[:4])
        if isinstance(x, float):
            return f"{x:.4f}"
        return "-" if x is None else str(x)

    rows = ["sequences", "tokens", "docs_per_sequence", "domains", "domains_per_sequence", "zipf", "doc_similarity", "duplicate_rate",
            "within_sequence_duplicates", "duplicate_sequences"]
    for row in rows:
        t.add_row(row, *[fmt(v.get(row)) for _, _, v in cols])
    return t
