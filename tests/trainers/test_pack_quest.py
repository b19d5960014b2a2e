"""Quest: RAKE, keyword filtering, the index split at split_ratio and the oversampling of short indexes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxbench.trainers.data.packing import Framer
from ctxbench.trainers.data.quest import QuestArgs, QuestIndex, QuestPacker
from ctxbench.trainers.data.rake import fallback_query, keywords, rake


def test_rake_matches_the_original_example():
    text = ("Compatibility of systems of linear constraints over the set of natural numbers. Criteria of compatibility "
            "of a system of linear Diophantine equations, strict inequations, and nonstrict inequations are considered. "
            "Upper bounds for components of a minimal set of solutions and algorithms of construction of minimal "
            "generating sets of solutions for all types of systems are given. These criteria and the corresponding "
            "algorithms for constructing a minimal supporting set of solutions can be used in solving all the "
            "considered types of systems and systems of mixed types.")
    top = [(p, round(s, 1)) for p, s in rake(text)[:6]]
    # Rose et al. (2010), Figure 1.5: the same phrases and scores
    assert top == [("minimal generating sets", 8.7), ("linear diophantine equations", 8.5),
                   ("minimal supporting set", 7.7), ("minimal set", 4.7), ("linear constraints", 4.5),
                   ("natural numbers", 4.0)]


def test_keyword_filters():
    assert keywords("what is the best way to parse email headers") == ["parse email headers"]  # "best way": stop keyword
    assert keywords("python") == []  # one word scores 1 < 3.0
    assert keywords("big cat", min_chars=8) == []  # "big cat" is 7 characters
    assert keywords("the tcp handshake, tcp handshake timing") == ["tcp handshake timing", "tcp handshake"]
    q = fallback_query('"""Utilities for parsing HTTP cookies."""\nimport re\ndef parse_cookie_header(value): ...')
    assert q.startswith("Utilities for parsing HTTP cookies") and keywords(q)


class ToyCorpus:
    def __init__(self, lengths):
        self.lengths = np.asarray(lengths, dtype=np.int64)

    def __len__(self):
        return len(self.lengths)

    def doc(self, i):
        return np.full(int(self.lengths[i]), 1000 + i, dtype=np.int32)


def toy_index(sizes, split_ratio, seed=0):
    """Keyword k_i owns sizes[i] documents; each document has exactly that one candidate keyword."""
    cands = [[f"kw{i:02d}"] for i, s in enumerate(sizes) for _ in range(s)]
    corpus = ToyCorpus([40] * len(cands))
    framer = Framer(corpus, seq_len=128, bos=1, eos=2)
    return framer, QuestIndex(cands, corpus.lengths + framer.nsep, split_ratio, seed)


@pytest.mark.parametrize("split_ratio,expect_short", [(0.0, 0), (0.3, 3), (0.25, 2), (1.0, 10)])
def test_index_split_follows_split_ratio(split_ratio, expect_short):
    sizes = [7, 1, 3, 10, 2, 5, 4, 9, 6, 8]
    _, ix = toy_index(sizes, split_ratio)
    assert ix.n_short == expect_short  # the floor(r * |I|) smallest indexes
    assert list(ix.sizes) == sorted(sizes)
    if 0 < expect_short < len(sizes):
        assert ix.sizes[:ix.n_short].max() <= ix.sizes[ix.n_short:].min()


@pytest.mark.parametrize("oversample", ["balance", 1.0, 3.0])
def test_oversampling_sets_the_short_token_share(oversample):
    sizes = [4] * 10 + [30] * 10  # short set (ratio 0.5): 40 docs, long set: 300 docs
    framer, ix = toy_index(sizes, 0.5)
    p = QuestPacker(framer, seed=1, index=ix, oversample=oversample)
    natural = ix.token_share_short()
    assert natural == pytest.approx(40 / 340)
    expect = {"balance": 0.5, 1.0: natural, 3.0: 3 * natural / (3 * natural + 1 - natural)}[oversample]
    assert p.p_short == pytest.approx(expect)
    n = 2000
    short_docs = set(np.flatnonzero(np.repeat(np.arange(20), sizes) < 10).tolist())
    from_short = 0
    for _ in range(n):
        seq, used = p.next()
        assert len(seq) == 128 and len(used) == len(set(used))
        from_short += all(d in short_docs for d in used)
    assert from_short / n == pytest.approx(expect, abs=0.04)


def test_documents_drawn_without_replacement_within_an_index():
    framer, ix = toy_index([12], 0.0)  # one index of 12 docs; 4 framed docs (42 tokens each) per 128-token sequence
    p = QuestPacker(framer, seed=0, index=ix, oversample="balance")
    first_pass = [d for _ in range(3) for d in p.next()[1]]
    assert sorted(first_pass) == list(range(12))
    second = [d for _ in range(3) for d in p.next()[1]]
    assert sorted(second) == list(range(12)) and second != first_pass  # reshuffled next pass


def test_quest_on_code_with_fallback_queries(tmp_path, smol_tokenizer):
    import sysconfig
    from pathlib import Path

    from ctxbench.trainers.data.corpus import CorpusConfig
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize

    src = Path(sysconfig.get_paths()["stdlib"]) / "email"
    cfg = SynthesisConfig(corpus=CorpusConfig(path=str(src), max_doc_tokens=256), method="quest",
                          method_args={"split_ratio": 0.2}, seq_len=1024, budget_tokens=40 * 1024,
                          tokenizer="smollm2-135m", out_dir=str(tmp_path / "q"), cache_dir=str(tmp_path / "c"))
    m = synthesize(cfg, tokenizer=smol_tokenizer)
    s = m.stats["methods"]["quest"]
    assert s["indexes"] > 20 and s["short_indexes"] == int(0.2 * s["indexes"])
    assert s["indexed_docs"] + s["unindexed_docs"] == m.stats["corpus"]["docs"]
    assert 0.3 < s["short_sequence_share"] < 0.7
    cached = list((Path(m.stats["corpus"]["dir"]) / "view-256").glob("quest-keywords-*.jsonl"))
    assert cached and all(isinstance(json.loads(line), list) for line in cached[0].read_text().splitlines())


@pytest.mark.slow
def test_doc2query_with_a_local_seq2seq_model(tmp_path, smol_tokenizer):
    """A tiny random T5 stands in for doc2query-t5: the model path is loaded and asked for one query per segment."""
    import sysconfig
    from pathlib import Path

    from transformers import T5Config, T5ForConditionalGeneration

    import ctxbench.trainers.data.quest as quest
    from ctxbench.trainers.data.corpus import CorpusConfig
    from ctxbench.trainers.data.token_cache import load_corpus

    model_dir = tmp_path / "t5"
    tok = smol_tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    T5ForConditionalGeneration(T5Config(vocab_size=len(tok), d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                                        decoder_start_token_id=pad, pad_token_id=pad, eos_token_id=tok.eos_token_id)
                               ).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    corpus = load_corpus(CorpusConfig(path=str(Path(sysconfig.get_paths()["stdlib"]) / "json"), max_doc_tokens=200),
                         tok, cache_root=tmp_path / "cache")
    seen = []
    real = quest._queries

    def spy(texts, args, model=None):
        out = real(texts, args, model)
        seen.append((model is not None, len(texts), len(out)))
        return out

    quest._queries = spy
    try:
        kws = quest.document_keywords(corpus, QuestArgs(query_model=str(model_dir), segment_tokens=100))
    finally:
        quest._queries = real
    assert len(kws) == len(corpus) and seen and all(m and n == k for m, n, k in seen)
    assert sum(n for _, n, _ in seen) == sum(-(-int(x) // 100) for x in corpus.lengths)  # one query per segment
