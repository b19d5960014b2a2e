"""The `hqa` synthesis method (`synthesize("hqa", config) -> manifest`, trainers/data/synthesis.py): documents ->
hierarchies -> summaries and QA pools -> long conversations.

Pipeline (§3, App. A): split each document into medium sections of small chunks; summarize every small
chunk, each medium (from its chunks' summaries, so the generator only ever reads one small chunk), and the
document (from the medium summaries); generate the hierarchical QAs (Algorithm 1) and the diverse pool (those
per-document pools: trainers/hqa/pools.py); then concatenate K documents per sample (Algorithm 2) and write JSON-lines shards plus manifest.json.
Randomness is seeded per document id and per sample index, and every call is cached, so a rerun after a
kill repeats no finished call and writes byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ctxbench.harness.core.config import load_config
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import EXECUTION, identity_args, identity_dump
from ctxbench.trainers.data.corpus import Corpus, CorpusConfig, Document, open_corpus
from ctxbench.trainers.data.generator import GeneratorConfig, generator_defaults
from ctxbench.trainers.data.synthesis import (
    Identity,
    content_hash,
    envelope,
    files_identity,
    finish,
    identity_or_older,
    list_shard,
    read_manifest,
    register_synthesis,
    remove_unlisted,
)
from ctxbench.trainers.hqa import prompts
from ctxbench.trainers.hqa.algorithms import (
    Composition,
    DocumentQAs,
    concatenate,
    draw_documents,
)
from ctxbench.trainers.hqa.generate import Generator
from ctxbench.trainers.hqa.pools import build_pools
from ctxbench.trainers.hqa.split import Hierarchy, split


class DocumentSource(BaseModel):
    """Where the long documents come from; read through the one corpus reader (trainers/data/corpus.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="squad JSON (e.g. squad/dev-v2.0.json), a .jsonl(.gz)/.parquet file or directory, or a "
                      "directory of .txt files; a relative path is looked up in the data dir (env CTXBENCH_DATA_DIR) first")
    format: Literal["squad", "jsonl", "parquet", "text_dir", "auto", "corpus"] = Field(
        "auto", description="squad: one document per article, its paragraphs joined by blank lines; corpus: read through "
        "`corpus` (a study's training split: its exclude_ids stay out); others as corpus files")
    text_field: str = Field("text", description="jsonl/parquet: the field holding the document text")
    max_documents: int | None = Field(None, ge=1, description="read at most this many documents (in file order)")
    corpus: dict[str, Any] | None = Field(None, description="format corpus: CorpusConfig keys (trainers/data/corpus.py), "
                                          "document ids as the corpus gives them")

    @model_validator(mode="after")
    def _corpus(self):
        if (self.format == "corpus") != (self.corpus is not None):
            raise ValueError("documents.corpus goes with format: corpus (and format: corpus needs documents.corpus)")
        return self

    def open(self, data_dir: Path | None) -> Corpus:
        if self.format == "corpus":
            return open_corpus(self.corpus or {})
        return open_corpus(CorpusConfig(path=self.path, format=self.format, text_field=self.text_field), data_dir=data_dir,
                           field="documents")

    def identity(self, corpus: Corpus) -> Any:
        """A study corpus by its identity (which includes the ids it leaves out); document files by their content
        (trainers/data/synthesis.files_identity): edited documents are different data under the same config."""
        return [corpus.identity] if self.format == "corpus" else files_identity(corpus.files(), corpus.root)

    def documents(self, corpus: Corpus) -> list[Document]:
        """In file order, with stable ids: the corpus's for a study corpus; otherwise the file path (a SQuAD article's
        title) or, for records, their position and a hash of their text."""
        docs = corpus.documents()
        if self.format != "corpus":
            docs = (replace(d, doc_id=d.path or f"doc{i:06d}-{hashlib.sha256(d.text[:4096].encode()).hexdigest()[:8]}")
                    for i, d in enumerate(docs))
        return list(islice(docs, self.max_documents))


class HQADataConfig(BaseModel):
    """A hierarchical-QA synthesis (configs/data/hqa-*.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    documents: DocumentSource = Field(description="the long documents (paper: Together long books)")
    tokenizer: str = Field(description="tokenizer (and chat template) of the model to be trained: chunks and sample "
                           "lengths are counted in its tokens")
    generator: GeneratorConfig = Field(description="the model that summarizes and writes QAs, through a ctxbench backend")
    small_tokens: int = Field(4096, ge=16, description="small chunk size in tokens (§3.1: 4K)")
    medium_tokens: int = Field(12288, ge=16, description="medium section size in tokens, a multiple of small_tokens (§3.1: "
                               "12K); shorter documents are skipped and counted")
    max_document_tokens: int | None = Field(None, ge=16, description="cut documents to this many tokens (whole small "
                                            "chunks); default: their share of target_tokens")
    word_limit: int = Field(100, ge=1, description="{word_limit} of the App. B summary prompt (the paper gives no value)")
    hierarchical_per_document: int = Field(25, ge=1, description="hierarchical QAs per document (§4.1: 25)")
    diverse_per_document: int = Field(50, ge=0, description="diverse QAs per document (§4.1: 50)")
    multihop_p: float = Field(0.2, ge=0, le=1, description="probability that a diverse QA is multi-hop (App. E: 20%)")
    multihop_chunks: tuple[int, int] = Field((2, 4), description="multi-hop QAs span this many small chunks (§3.1: 2-4)")
    documents_per_sample: int = Field(2, ge=1, description="K documents concatenated per conversation (§4.2: 2/4/8/12 "
                                      "for 180K/350K/650K/1M)")
    target_tokens: int = Field(ge=64, description="longest conversation in tokens of `tokenizer` (the stage's seq_len)")
    samples: int = Field(ge=1, description="conversations to write (§4.2: 2000/1280/600/200)")
    composition: Composition = Field(default_factory=Composition, description="Algorithm 2 counts and Table 7's ablation axes")
    max_retries: int = Field(2, ge=0, description="re-asks of a reply that is not a question/answer dict, then it is dropped")
    seed: int = Field(0, description="seed for chunk choices, prompt draws and document order")
    out_dir: str = Field(description="where shards (*.jsonl) and manifest.json go", json_schema_extra=EXECUTION)
    cache_dir: str | None = Field(None, description="generator-call cache; default <ctxbench cache>/hqa-calls (shared by "
                                  "every synthesis, so stages reuse each other's calls)", json_schema_extra=EXECUTION)
    shard_samples: int = Field(100, ge=1, description="conversations per shard file", json_schema_extra=EXECUTION)

    _generator_defaults = generator_defaults("generator", batch_size=32)

    @model_validator(mode="after")
    def _sizes(self):
        if self.medium_tokens % self.small_tokens:
            raise ValueError(f"medium_tokens ({self.medium_tokens}) must be a multiple of small_tokens ({self.small_tokens})")
        lo, hi = self.multihop_chunks
        if not 2 <= lo <= hi <= 4:
            raise ValueError("multihop_chunks must be a range within 2..4 (App. B's multi-hop prompt)")
        return self

    def config_hash(self) -> str:
        """The config part of the synthesis identity (harness/core/identity.py): where it is written, and how calls
        are batched or run (the generator backend's execution-only arguments), left out."""
        gen = self.generator
        return self._hash(identity_args(gen.backend, gen.backend_args))

    def legacy_config_hash(self) -> str:
        """The config hash an older ctxbench gave this config (its fixed list of volatile backend arguments left out)."""
        from ctxbench.trainers.data.generator import LEGACY_VOLATILE_BACKEND_ARGS

        return self._hash({k: v for k, v in self.generator.backend_args.items() if k not in LEGACY_VOLATILE_BACKEND_ARGS})

    def _hash(self, backend_args: dict[str, Any]) -> str:
        return content_hash({**identity_dump(self), "generator": {**identity_dump(self.generator), "backend_args": backend_args}})


def load_data_config(path: Path, **overrides: Any) -> HQADataConfig:
    return load_config(path, HQADataConfig, kind="data", expect="hqa data settings (documents, generator, ...)", **overrides)


def data_dir_default() -> Path | None:
    env = os.environ.get("CTXBENCH_DATA_DIR")
    return Path(env) if env else None


# --- sizes --------------------------------------------------------------------------------------
def turns_per_sample(cfg: HQADataConfig) -> int:
    """An upper bound on QA turns in one conversation (summary turns included)."""
    c, k = cfg.composition, cfg.documents_per_sample
    top = c.count_range[1] if c.counts == "randomized" else None
    n1, n2, n3 = (top, top, top) if top else (c.n1, c.n2, c.n3)
    earlier = n2 * ("s" in c.revisit) + n3 * ("h" in c.revisit) * (k - 1) if k > 1 else 0
    return k * (1 + 2 * n1) + (k - 1) * earlier


def document_budget(cfg: HQADataConfig, tokenizer) -> int:
    """Tokens each document may take so that K documents and their QA turns fit target_tokens."""
    from ctxbench.trainers.hqa.chat import tokenize

    one = len(tokenize(tokenizer, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])[0])
    two = len(tokenize(tokenizer, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}] * 2)[0])
    per_turn = (two - one) + cfg.generator.max_new_tokens + len(tokenizer(cfg.generator.answer_prefix)["input_ids"])
    fixed = (one - (two - one)) + cfg.documents_per_sample * len(tokenizer(prompts.SUMMARY_REQUEST)["input_ids"])
    budget = (cfg.target_tokens - fixed - turns_per_sample(cfg) * per_turn) // cfg.documents_per_sample
    if budget < cfg.medium_tokens:
        raise ConfigError(f"target_tokens: {cfg.target_tokens} leaves {max(budget, 0)} tokens per document after room for "
                          f"{turns_per_sample(cfg)} QA turns of up to {per_turn} tokens, less than one medium section "
                          f"({cfg.medium_tokens}); raise target_tokens or lower documents_per_sample, the counts or max_new_tokens")
    return min(budget, cfg.max_document_tokens or budget)


# --- the whole synthesis ------------------------------------------------------------------------
def hqa_identity(cfg: HQADataConfig, *, data_dir: Path | None = None, **_: Any) -> Identity:
    """The config (cfg.config_hash()), the documents' files and the generator's fingerprint; an out_dir an older
    ctxbench wrote for the same synthesis keeps the identity it was written under."""
    from ctxbench.trainers.data.generator import fingerprint, legacy_fingerprint

    src = cfg.documents
    inputs = content_hash(src.identity(src.open(data_dir or data_dir_default())))
    ident = Identity(cfg.config_hash(), inputs, fingerprint(cfg.generator))
    older = Identity(cfg.legacy_config_hash(), inputs, legacy_fingerprint(cfg.generator) or ident.generator)
    return identity_or_older(cfg.out_dir, ident, older)


def _hierarchies(cfg: HQADataConfig, tok, budget: int, data_dir: Path | None, drops: Counter) -> tuple[int, list[Hierarchy]]:
    """The documents read, and those long enough for one medium section, cut into hierarchies."""
    docs = cfg.documents.documents(cfg.documents.open(data_dir))
    hierarchies = []
    for d in docs:
        h = split(d, tok, small_tokens=cfg.small_tokens, medium_tokens=cfg.medium_tokens, max_tokens=budget)
        if h is None:
            drops["documents:shorter_than_medium"] += 1
        else:
            hierarchies.append(h)
    if not hierarchies:
        raise ConfigError(f"documents: none of the {len(docs)} documents has {cfg.medium_tokens} tokens (one medium section); "
                          "use longer documents or lower medium_tokens")
    return len(docs), hierarchies


def _generator(cfg: HQADataConfig, generator: Generator | None, on_calls) -> Generator:
    """The generator client, its context checked against the longest prompt before any call."""
    from ctxbench.harness.core.models import cache_dir

    gen = generator or Generator(cfg.generator, Path(cfg.cache_dir) if cfg.cache_dir else cache_dir("hqa-calls"),
                                 max_retries=cfg.max_retries, on_calls=on_calls)
    longest = max(cfg.multihop_chunks[1] if cfg.multihop_p > 0 else 1, 1)
    gen.check_window(prompts.multihop(["x " * cfg.small_tokens] * longest) if longest > 1 else
                     prompts.qa(prompts.SPECIFIC, "x " * cfg.small_tokens))
    return gen


def _conversations(cfg: HQADataConfig, tok, out: Path, picks: list[list[int]], pools: dict[int, DocumentQAs | None],
                   drops: Counter) -> tuple[list[dict[str, Any]], Counter, list[int], list[int]]:
    """Algorithm 2 per sample: its K documents' pools concatenated into one conversation, tokenized and counted."""
    from ctxbench.trainers.hqa.chat import IGNORE, tokenize

    rows, kinds, lengths, answers = [], Counter(), [], []
    for s, pick in enumerate(picks):
        if any(pools[i] is None for i in pick):
            drops["samples:document_failed"] += 1
            continue
        fresh = [DocumentQAs(pools[i].doc_id, pools[i].text, pools[i].summary, pools[i].hierarchical, pools[i].diverse)
                 for i in pick]
        messages, turns = concatenate(fresh, np.random.default_rng([cfg.seed, 4, s]), cfg.composition)
        if not messages:  # no-sum and every QA of its documents dropped: nothing to train on
            drops["samples:no_turns"] += 1
            continue
        ids, labels = tokenize(tok, messages)
        if len(ids) > cfg.target_tokens:
            drops["samples:over_target_tokens"] += 1
            continue
        n_answer = sum(1 for x in labels if x != IGNORE)
        kinds.update(t["kind"] for t in turns)
        lengths.append(len(ids))
        answers.append(n_answer)
        rows.append({"conversations": messages, "meta": {"id": f"{out.name}-{s:06d}", "documents": [pools[i].doc_id for i in pick],
                                                          "tokens": len(ids), "answer_tokens": n_answer, "turns": turns}})
    return rows, kinds, lengths, answers


def _write_shards(out: Path, manifest: dict[str, Any], rows: list[dict[str, Any]], per_shard: int) -> None:
    """JSON-lines shards of per_shard conversations, each listed once written; shards left by a killed run go."""
    for b in range(0, len(rows), per_shard):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[b: b + per_shard])
        list_shard(out, manifest, f"shard-{b // per_shard:05d}.jsonl", {"": text})
    remove_unlisted(out, set(manifest["shards"]), ("shard-*.jsonl",))


@register_synthesis("hqa", HQADataConfig, identity=hqa_identity, extra="train", extra_modules=("transformers",),
                    produces="hqa", trainer="hqa_sft")
def _hqa(cfg: HQADataConfig, ident: Identity, *, data_dir: Path | None = None, on_calls: Callable[[int], None] | None = None,
         generator: Generator | None = None) -> dict[str, Any]:
    """hierarchical-QA: long documents summarized and questioned by a generator, then concatenated into conversations."""
    from ctxbench.harness.core.models import load_tokenizer, tokenizer_fingerprint
    from ctxbench.trainers.hqa.chat import require_chat_template

    out = Path(cfg.out_dir)
    tok = load_tokenizer(cfg.tokenizer)
    require_chat_template(tok, "tokenizer", cfg.tokenizer)
    budget = document_budget(cfg, tok)
    drops: Counter = Counter()
    n_docs, hierarchies = _hierarchies(cfg, tok, budget, data_dir or data_dir_default(), drops)
    picks = draw_documents(len(hierarchies), cfg.samples, cfg.documents_per_sample, np.random.default_rng([cfg.seed, 3]))
    used = sorted({i for p in picks for i in p})
    gen = _generator(cfg, generator, on_calls)
    pools = dict(zip(used, build_pools([hierarchies[i] for i in used], gen, cfg)))
    drops.update(gen.drops)
    drops["documents:no_global_summary"] += sum(1 for p in pools.values() if p is None)
    rows, kinds, lengths, answers = _conversations(cfg, tok, out, picks, pools, drops)
    if not rows:
        raise ConfigError(f"out_dir: no conversation survived ({dict(+drops)}); check the generator and target_tokens")
    qas = {kind: sum(len(getattr(pools[i], kind)) for i in used if pools[i]) for kind in ("hierarchical", "diverse")}
    manifest = {
        **envelope("hqa", ident, drops=drops), "config_hash": ident.config, "data_hash": ident.hash,
        "generator_fingerprint": gen.fingerprint, "prompts_hash": prompts.prompts_hash(), "tokenizer": cfg.tokenizer,
        "tokenizer_fingerprint": tokenizer_fingerprint(tok), "shards": [], "samples": len(rows),
        "document_budget_tokens": budget,
        "counts": {"documents_read": n_docs, "documents_usable": len(hierarchies), "documents_used": len(used),
                   "qas_requested": {"hierarchical": len(used) * cfg.hierarchical_per_document,
                                     "diverse": len(used) * cfg.diverse_per_document},
                   "qas_generated": qas, "turns": dict(sorted(kinds.items())), "generator": gen.totals(),
                   "tokens": {"total": sum(lengths), "answer": sum(answers), "max": max(lengths), "min": min(lengths)}},
        "config": cfg.model_dump(mode="json"),
    }
    _write_shards(out, manifest, rows, cfg.shard_samples)
    return finish(out, manifest, drops)


def read_conversations(out_dir: str | Path) -> list[dict[str, Any]]:
    m = read_manifest(out_dir)
    if not m or not m.get("complete"):
        raise ConfigError(f"data: {out_dir} holds no finished hqa synthesis (manifest.json); run `ctxbench data hqa` first")
    rows = []
    for name in m["shards"]:
        with open(Path(out_dir) / name, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows
