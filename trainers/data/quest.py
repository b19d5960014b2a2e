"""Quest (query-centric synthesis, Algorithm 1): group documents that answer similar queries.

Per document: a query per segment (doc2query with a local seq2seq model, a generator model prompted through
the one generator client (trainers/data/generator.py, calls cached), or the offline fallback in rake.fallback_query), RAKE keywords of the queries filtered to score >= min_keyword_score, at least
4 characters and not a stop keyword, and one of them drawn at random as the document's keyword.
Documents sharing a keyword form an inverted index. Indexes sorted by size ascending are split: the
first floor(split_ratio * |I|) are the short set I_s, the rest the long set I_l. Each sequence picks
a set (short with probability p_s), an index within it (proportional to its tokens), and draws that
index's documents without replacement (a cursor that reshuffles when the index is exhausted) until
the context is full. oversample="balance" sets p_s = 0.5, so tokens split evenly between the sets as
in the paper; a number f weights I_s f-fold over its natural token share (1 = no oversampling).
Documents without a keyword are left out (the paper keeps only keyword-indexed documents).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ctxbench.harness.core.identity import content_hash
from ctxbench.harness.core.io import atomic_write
from ctxbench.trainers.data.generator import GeneratorConfig, generator_defaults
from ctxbench.trainers.data.methods import register_method
from ctxbench.trainers.data.packing import Packer, epoch_order
from ctxbench.trainers.data.rake import STOP_KEYWORDS, fallback_query, keywords


class QuestArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split_ratio: float = Field(0.2, ge=0, le=1, description="fraction of keyword indexes (smallest first) in the "
                                                            "oversampled short set (paper: 0.1-0.3 works best)")
    oversample: Literal["balance"] | float = Field("balance", description="'balance': half the tokens from short "
                                                   "indexes (paper); a number f >= 1: short indexes weighted f-fold")
    min_keyword_score: float = Field(3.0, ge=0, description="drop RAKE keywords scoring below this")
    min_keyword_chars: int = Field(4, ge=1, description="drop keywords shorter than this")
    stop_keywords: list[str] = Field(default_factory=list, description="extra non-informative keywords to drop "
                                     "(added to the paper's list)")
    query_model: str | None = Field(None, description="local seq2seq model directory for doc2query (e.g. a "
                                    "doc2query-t5 checkpoint); unset: the offline first-line + RAKE-phrases query")
    segment_tokens: int = Field(512, ge=16, description="predict one query per segment of this many LM tokens")
    max_segments: int = Field(8, ge=1, description="at most this many segments (queries) per document")
    query_phrases: int = Field(3, ge=1, description="fallback query: number of top RAKE phrases of the segment")
    query_generator: GeneratorConfig | None = Field(None, description="a ctxbench generator that writes each segment's "
                                                    "query (QUERY_PROMPT; calls cached beside the corpus cache); "
                                                    "instead of query_model")

    _generator_defaults = generator_defaults("query_generator", max_new_tokens=32)

    @model_validator(mode="after")
    def _one_query_writer(self):
        if self.query_model and self.query_generator:
            raise ValueError("give query_model (a seq2seq doc2query model) or query_generator, not both")
        return self


QUERY_PROMPT = ("Write the search query that the passage below answers best. Reply with the query only.\n\n{passage}")


def _queries(texts: list[str], args: QuestArgs, model=None) -> list[str]:
    if hasattr(model, "complete"):  # a GeneratorClient
        return [q.strip() for q in model.complete([QUERY_PROMPT.format(passage=t) for t in texts])]
    if model is None:
        return [fallback_query(t, args.query_phrases) for t in texts]
    tok, m = model
    enc = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=512)
    out = m.generate(**enc, max_new_tokens=32, do_sample=False)
    return tok.batch_decode(out, skip_special_tokens=True)


def _load_query_model(path: str):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ctxbench.harness.core.errors import ConfigError

    try:
        tok = AutoTokenizer.from_pretrained(path)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        return tok, AutoModelForSeq2SeqLM.from_pretrained(path).eval()
    except OSError as e:
        raise ConfigError(f"method_args.query_model: cannot load {path!r} ({str(e).splitlines()[0]}); "
                          "give a local seq2seq model directory or leave it unset") from None


def _query_writer(args: QuestArgs, cache: Path):
    """The generator client of query_generator (built lazily: a cached run loads no model), else None."""
    if args.query_generator is None:
        return None
    from ctxbench.trainers.data.generator import GeneratorClient

    return GeneratorClient(args.query_generator, cache_dir=cache / "quest-calls")


def document_keywords(corpus, args: QuestArgs, progress=None) -> list[list[str]]:
    """Candidate keywords per document (before the random pick), cached per corpus view and query settings."""
    from ctxbench.trainers.data.retrievers import derived_dir

    settings = args.model_dump(include={"min_keyword_score", "min_keyword_chars", "stop_keywords", "query_model",
                                        "segment_tokens", "max_segments", "query_phrases"})
    model = _query_writer(args, derived_dir(corpus))
    if args.query_generator is not None:  # by its fingerprint: what cannot change a query leaves the key alone
        settings["query_generator"] = model.fingerprint
    key = content_hash(settings, 12)
    path = derived_dir(corpus) / f"quest-keywords-{key}.jsonl"
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines()]
    if args.query_model:
        model = _load_query_model(args.query_model)
    stop = STOP_KEYWORDS | {s.lower() for s in args.stop_keywords}
    seg, out = args.segment_tokens, []
    batch = 256
    for lo in range(0, len(corpus), batch):
        ids = range(lo, min(len(corpus), lo + batch))
        pieces, owner = [], []
        for d in ids:
            toks = corpus.doc(d)
            for s in range(0, min(len(toks), seg * args.max_segments), seg):
                pieces.append(toks[s:s + seg].tolist())
                owner.append(d)
        texts = corpus.tokenizer.backend_tokenizer.decode_batch(pieces, skip_special_tokens=False)
        queries = _queries(texts, args, model)
        kws: dict[int, list[str]] = {d: [] for d in ids}
        for d, q in zip(owner, queries):
            for k in keywords(q, args.min_keyword_score, args.min_keyword_chars, stop):
                if k not in kws[d]:
                    kws[d].append(k)
        out.extend(kws[d] for d in ids)
        if progress:
            progress(lo + len(ids), len(corpus))
    atomic_write(path, "".join(json.dumps(k) + "\n" for k in out))
    return out


class QuestIndex:
    """Keyword -> documents, split by size into short and long sets."""

    def __init__(self, cands: list[list[str]], framed: np.ndarray, split_ratio: float, seed: int):
        rng = np.random.default_rng([seed, 7])
        groups: dict[str, list[int]] = {}
        for d, ks in enumerate(cands):
            if ks:
                groups.setdefault(ks[int(rng.integers(len(ks)))], []).append(d)
        self.keywords = sorted(groups, key=lambda k: (len(groups[k]), k))  # ascending size, ties by keyword
        self.members = [np.asarray(groups[k], dtype=np.int64) for k in self.keywords]
        self.sizes = np.array([len(m) for m in self.members], dtype=np.int64)
        self.tokens = np.array([framed[m].sum() for m in self.members], dtype=np.float64)
        self.n_short = int(np.floor(split_ratio * len(self.members) + 1e-9))
        self.unindexed = sum(1 for ks in cands if not ks)

    def token_share_short(self) -> float:
        total = self.tokens.sum()
        return float(self.tokens[:self.n_short].sum() / total) if total else 0.0


class QuestPacker(Packer):
    name = "quest"

    def __init__(self, framer, seed: int, index: QuestIndex, oversample):
        super().__init__(framer, seed)
        if not index.members:
            from ctxbench.harness.core.errors import ConfigError

            raise ConfigError("method_args: quest found no keyword in any document; lower min_keyword_score or "
                              "check the corpus text")
        self.ix = index
        t_s, t_l = index.tokens[:index.n_short].sum(), index.tokens[index.n_short:].sum()
        if t_s == 0 or t_l == 0:
            self.p_short = 1.0 if t_l == 0 else 0.0
        elif oversample == "balance":
            self.p_short = 0.5
        else:
            self.p_short = float(oversample) * t_s / (float(oversample) * t_s + t_l)
        self.sets = [np.arange(index.n_short), np.arange(index.n_short, len(index.members))]
        self.cum = [np.cumsum(index.tokens[s]) for s in self.sets]
        self.passes = np.zeros(len(index.members), dtype=np.int64)
        self.pos = np.zeros(len(index.members), dtype=np.int64)
        self._orders: dict[int, tuple[int, np.ndarray]] = {}
        self.seq_short = 0

    def _pick(self, which: int) -> int:
        cum = self.cum[which]
        return int(self.sets[which][np.searchsorted(cum, self.rng.random() * cum[-1], side="right")])

    def _draw(self, i: int) -> int | None:
        """Next document of index i without replacement within its current pass; None when the pass ends."""
        members = self.ix.members[i]
        if self.pos[i] >= len(members):
            self.passes[i] += 1
            self.pos[i] = 0
            return None
        cached = self._orders.get(i)
        if cached is None or cached[0] != self.passes[i]:
            cached = (int(self.passes[i]), epoch_order(len(members), self.seed, f"q{i}", int(self.passes[i])))
            self._orders[i] = cached
        d = int(members[cached[1][self.pos[i]]])
        self.pos[i] += 1
        return d

    def next(self) -> tuple[np.ndarray, list[int]]:
        which = 0 if self.rng.random() < self.p_short else 1
        if len(self.sets[which]) == 0:
            which = 1 - which
        docs, taken, length, idle = [], set(), 0, 0
        while length < self.framer.seq_len:
            src = 1 - which if idle >= 50 and len(self.sets[1 - which]) else which  # stuck: borrow from the other set
            i = self._pick(src)
            added = 0
            while length < self.framer.seq_len:
                d = self._draw(i)
                if d is None:
                    break
                if d in taken:
                    continue
                docs.append(d)
                taken.add(d)
                length += self.framer.framed_len(d)
                added += 1
            idle = 0 if added else idle + 1
            if idle > 1000:
                raise ValueError("quest: keyword indexes cannot fill a sequence without repeating documents")
        seq, used = self.framer.assemble(docs)
        self.truncated += length - self.framer.seq_len
        self.seq_short += which == 0
        self._count(used)
        return seq, used

    def state(self) -> dict[str, Any]:
        return {**super().state(), "passes": self.passes.copy(), "pos": self.pos.copy(), "seq_short": self.seq_short}

    def load_state(self, st: dict[str, Any]) -> None:
        super().load_state(st)
        self.passes, self.pos = np.asarray(st["passes"]).copy(), np.asarray(st["pos"]).copy()
        self.seq_short = st["seq_short"]

    def summary(self) -> dict[str, Any]:
        ix = self.ix
        return {**super().summary(), "indexes": len(ix.members), "short_indexes": ix.n_short,
                "long_indexes": len(ix.members) - ix.n_short,
                "short_max_size": int(ix.sizes[:ix.n_short].max()) if ix.n_short else 0,
                "indexed_docs": int(ix.sizes.sum()), "unindexed_docs": ix.unindexed,
                "short_token_share_corpus": round(ix.token_share_short(), 4), "p_short": round(self.p_short, 4),
                "short_sequence_share": round(self.seq_short / max(self.sequences, 1), 4),
                "largest_indexes": {ix.keywords[i]: int(ix.sizes[i]) for i in range(len(ix.members) - 1,
                                                                                  max(-1, len(ix.members) - 6), -1)}}


@register_method("quest", QuestArgs)
def build_quest(*, framer, args: QuestArgs, seed: int, progress=None, **_):
    """Quest: documents grouped by a keyword of their predicted query; short indexes oversampled."""
    if isinstance(args.oversample, float) and args.oversample < 1:
        from ctxbench.harness.core.errors import ConfigError

        raise ConfigError("method_args.oversample: must be 'balance' or a number >= 1")
    cands = document_keywords(framer.corpus, args, progress)
    framed = framer.corpus.lengths + framer.nsep
    index = QuestIndex(cands, framed, args.split_ratio, seed)
    if index.tokens.sum() < 2 * framer.seq_len:
        from ctxbench.harness.core.errors import ConfigError

        raise ConfigError(f"seq_len: quest's keyword-indexed documents hold {int(index.tokens.sum())} tokens, too few "
                          f"for sequences of {framer.seq_len}; use a larger corpus or a smaller seq_len")
    return QuestPacker(framer, seed, index, args.oversample)
