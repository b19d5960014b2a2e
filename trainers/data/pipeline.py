"""synthesize(config): corpus -> packing method -> sharded fixed-length sequences + manifest, resumably.

After every shard the packer's full state is saved (state-NNNNN.npz, NNNNN = shards done) before the
manifest lists the shard, so a run killed at any point resumes from the last listed shard and produces
byte-identical shards to an uninterrupted run; files past the manifest are discarded on resume.
Each shard has a side file (shard-NNNNN.docs.npz: per-sequence document ids, domains, source, and whether
the sequence starts with the rest of a document cut off before) that `ctxbench data inspect` reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.identity import identity_dump
from ctxbench.harness.core.io import atomic_write
from ctxbench.trainers.data.corpus import CorpusConfig
from ctxbench.trainers.data.method_args import get_method, parse_args
from ctxbench.trainers.data.pack_config import SynthesisConfig
from ctxbench.trainers.data.packing import Framer, Mixer, StreamPacker, load_state, save_state
from ctxbench.trainers.data.shards import Manifest, ShardWriter
from ctxbench.trainers.data.shards import read_manifest as shards_manifest
from ctxbench.trainers.data.synthesis import SCHEMA, Identity, identity
from ctxbench.trainers.data.token_cache import load_corpus

SHARD_TOKENS = 16 * 1024 * 1024
_TOKENIZERS: dict[str, Any] = {}


def load_config(path: str | Path, **overrides: Any) -> SynthesisConfig:
    """Read a YAML synthesis config; validation errors become one-line ConfigErrors naming the key."""
    from ctxbench.harness.core.config import load_config as load

    cfg = load(path, SynthesisConfig, kind="data", expect="config keys (corpus, method, seq_len, ...)", **overrides)
    parse_args(cfg.method, cfg.method_args)
    return cfg


def with_stdlib_corpus(config: SynthesisConfig) -> SynthesisConfig:
    """'stdlib:[pkg,...]' corpora (as trainer configs accept them) copied beside out_dir, as `ctxbench train` does."""
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    root = Path(config.out_dir).parent
    update = {key: CorpusConfig(**resolve_corpus(c.model_dump(exclude_unset=True), root))
              for key, c in (("corpus", config.corpus), ("mix_corpus", config.mix_corpus))
              if c is not None and c.path.startswith("stdlib:")}
    return config.model_copy(update=update) if update else config


def _tokenizer(spec: str):
    if spec not in _TOKENIZERS:
        from ctxbench.harness.core.models import load_tokenizer

        _TOKENIZERS[spec] = load_tokenizer(spec)
    return _TOKENIZERS[spec]


def _separators(tok) -> tuple[int | None, int]:
    eos, bos = tok.eos_token_id, tok.bos_token_id
    if eos is None:
        raise ConfigError("tokenizer: it has no EOS token to separate documents; use another tokenizer")
    return (None if bos is None or bos == eos else int(bos)), int(eos)


def _corpus(cfg: CorpusConfig, tok, cache_dir: str | None):
    return load_corpus(cfg, tok, cache_root=cache_dir)


def _cleanup(out: Path, n: int) -> None:
    """Remove anything a killed run wrote past the manifest (shards not listed, newer states, temp files), and the
    states before the last listed shard's (a kill -9 between listing a shard and deleting the previous state leaves
    one behind; only state-n is ever read again)."""
    for f in out.iterdir():
        stem = f.name.split(".")[0]
        idx = int(stem.split("-")[1]) if stem.startswith(("shard-", "state-")) and stem[6:].isdigit() else None
        stale_state = idx is not None and idx < n and stem.startswith("state-")
        if ".tmp" in f.name or stale_state or (idx is not None and (idx > n or (idx == n and stem.startswith("shard-")))):
            f.unlink()


def pack_identity(config: SynthesisConfig, **_: Any) -> Identity:
    """What the packing depends on, not where it is written: the config with validated method_args, and what the
    corpora hold (their content, not their place: a packed directory copied or moved with its corpus is still finished)."""
    from ctxbench.trainers.data.corpus import open_corpus

    corpora = [open_corpus(c).content_identity for c in (config.corpus, config.mix_corpus) if c is not None]
    return identity(_config_dump(config), corpora)


def _config_dump(config: SynthesisConfig) -> dict[str, Any]:
    cfg = identity_dump(config)  # where it is written and cached left out, as each field declares
    cfg["method_args"] = parse_args(config.method, config.method_args).model_dump(mode="json")
    if config.attention == "cross_document":
        del cfg["attention"]  # the default, as packings were before the option: their identities stay
    return cfg


def synthesize(config: SynthesisConfig, *, progress: Callable[[int, int], None] | None = None,
               tokenizer=None) -> Manifest:
    """Write config.budget_tokens of packed sequences to config.out_dir; resumes a partial run, returns a
    finished one as is (trainers/data/synthesis.py). progress(tokens_done, tokens_total) is called after every shard."""
    from ctxbench.trainers.data import synthesis

    return synthesis.synthesize(config.method, config, progress=progress, tokenizer=tokenizer)


@dataclass
class _Prepared:
    """A packer ready to run: the corpora it reads, its separators and the domain names of the side files."""

    packer: Any
    corpus: Any
    mix: Any
    mix_offset: int
    domain_names: list[str]
    separators: tuple[int | None, int]
    timing: dict[str, float]


def _prepare(config: SynthesisConfig, tokenizer) -> _Prepared:
    t0 = time.perf_counter()
    tok = tokenizer if tokenizer is not None else _tokenizer(config.tokenizer)
    bos, eos = _separators(tok)
    corpus = _corpus(config.corpus, tok, config.cache_dir)
    t_corpus = time.perf_counter()
    framer = Framer(corpus, config.seq_len, bos, eos)
    if corpus.num_tokens + framer.nsep * len(corpus) < config.seq_len:
        raise ConfigError(f"seq_len: the corpus holds {corpus.num_tokens} tokens in {len(corpus)} documents, less than "
                          f"one sequence of {config.seq_len}; use a larger corpus or a smaller seq_len")
    packer = get_method(config.method).build(framer=framer, args=parse_args(config.method, config.method_args),
                                             seed=config.seed)
    domain_names = list(corpus.domain_names)
    mix, mix_offset = corpus, 0
    if config.mix_ratio > 0:
        mix = corpus if config.mix_corpus is None else _corpus(config.mix_corpus, tok, config.cache_dir)
        if mix is not corpus:
            mix_offset = len(domain_names)
            domain_names += mix.domain_names
        packer = Mixer(packer, StreamPacker(Framer(mix, config.seq_len, bos, eos), config.seed + 1), config.mix_ratio)
    timing = {"load_corpus_seconds": round(t_corpus - t0, 3), "prepare_seconds": round(time.perf_counter() - t_corpus, 3)}
    return _Prepared(packer, corpus, mix, mix_offset, domain_names, (bos, eos), timing)


def _start(out: Path, config: SynthesisConfig, ident: Identity, prep: _Prepared, total: int) -> Manifest:
    """A fresh manifest, or the interrupted one with the packer restored to its last listed shard."""
    manifest = shards_manifest(out)
    if manifest is None:
        out.mkdir(parents=True, exist_ok=True)
        _cleanup(out, 0)
        manifest = Manifest(method=config.method, seq_len=config.seq_len, tokenizer=config.tokenizer,
                            config=_config_dump(config), config_hash=ident.config, schema=SCHEMA, identity=ident.as_dict())
    else:
        _cleanup(out, len(manifest.shards))
        if manifest.shards:
            prep.packer.load_state(load_state(out / f"state-{len(manifest.shards):05d}.npz"))
    corpus = prep.corpus
    bos, eos = prep.separators
    manifest.stats.update({"corpus": {"key": corpus.key, "dir": str(corpus.dir), "docs": len(corpus),
                                      "tokens": corpus.num_tokens}, "domain_names": prep.domain_names,
                           "separators": {"bos": bos, "eos": eos}, "target_sequences": total})
    manifest.stats.setdefault("timing", {"pack_seconds": 0.0}).update(prep.timing)
    return manifest


class _SideFiles:
    """Per-sequence provenance of the shard being filled, written (with the packer's state) before it is listed."""

    def __init__(self, out: Path, prep: _Prepared, manifest: Manifest):
        self.out, self.prep, self.manifest = out, prep, manifest
        self.docs: list[list[int]] = []
        self.sources: list[int] = []
        self.continued: list[bool] = []
        self.starts: list[np.ndarray] | None = [] if manifest.config.get("attention") == "per_document" else None
        self.t_last = time.perf_counter()

    def add(self, docs: list[int], source: int, continued: bool, seq: np.ndarray) -> None:
        if self.starts is not None:
            self.starts.append(document_starts(seq, self.prep.separators[1]))
        self.docs.append(docs)
        self.sources.append(source)
        self.continued.append(continued)

    def write(self, n: int) -> None:
        p = self.prep
        lens = np.array([len(d) for d in self.docs], dtype=np.int64)
        ids = np.array([d for ds in self.docs for d in ds], dtype=np.int64)
        src = np.repeat(np.array(self.sources, dtype=np.int8), lens)
        dom = np.zeros(len(ids), dtype=np.int32)
        own = (src == 0) | (p.mix is p.corpus)
        dom[own] = p.corpus.domains[ids[own]]
        dom[~own] = p.mix.domains[ids[~own]] + p.mix_offset
        starts = {} if self.starts is None else {  # per_document: where each sequence's documents start
            "start_offsets": np.concatenate([[0], np.cumsum([len(s) for s in self.starts])]),
            "starts": np.concatenate(self.starts).astype(np.int32)}
        atomic_write(self.out / f"shard-{n:05d}.docs.npz", lambda f: np.savez(
            f, offsets=np.concatenate([[0], np.cumsum(lens)]), doc_ids=ids.astype(np.int32), domains=dom,
            source=np.array(self.sources, dtype=np.int8), continued=np.array(self.continued, dtype=bool), **starts))
        save_state(self.out / f"state-{n + 1:05d}.npz", p.packer.state())
        now = time.perf_counter()
        timing = self.manifest.stats["timing"]
        timing["pack_seconds"] = round(timing["pack_seconds"] + now - self.t_last, 3)
        self.t_last = now
        packer = p.packer
        self.manifest.stats["methods"] = packer.summary() if isinstance(packer, Mixer) else {packer.name: packer.summary()}
        self.docs, self.sources, self.continued = [], [], []
        self.starts = None if self.starts is None else []


class _Writer(ShardWriter):
    def __init__(self, out: Path, manifest: Manifest, shard_size: int, side: _SideFiles):
        super().__init__(out, manifest, shard_size)
        self.side = side

    def flush(self, **stats: Any) -> None:
        if self.buffer:
            self.side.write(len(self.manifest.shards))
        super().flush(**stats)


def _pack(config: SynthesisConfig, ident: Identity, *, progress: Callable[[int, int], None] | None = None,
          tokenizer=None) -> Manifest:
    """Pack a corpus into fixed-length sequences with a packing method (the CPT data recipes)."""
    out = Path(config.out_dir)
    prep = _prepare(config, tokenizer)
    total = math.ceil(config.budget_tokens / config.seq_len)
    manifest = _start(out, config, ident, prep, total)
    side = _SideFiles(out, prep, manifest)
    writer = _Writer(out, manifest, config.shard_size or max(1, SHARD_TOKENS // config.seq_len), side)
    packer = prep.packer
    while manifest.num_sequences + len(writer.buffer) < total:
        src = packer.next_source() if isinstance(packer, Mixer) else 0
        seq, docs = packer.next()
        side.add(docs, src, packer.continued, seq)
        before = len(manifest.shards)
        writer.add(seq)
        if len(manifest.shards) > before:
            _listed(out, before, progress, manifest, config.seq_len, total)
    n = len(manifest.shards)
    writer.close()
    if len(manifest.shards) > n:
        _listed(out, n, progress, manifest, config.seq_len, total)
    return manifest


def _listed(out: Path, n: int, progress, manifest: Manifest, seq_len: int, total: int) -> None:
    old = out / f"state-{n:05d}.npz"
    if old.exists():
        old.unlink()
    if progress:
        progress(manifest.tokens, total * seq_len)


def document_starts(seq: np.ndarray, eos: int) -> np.ndarray:
    """Token offsets where the sequence's documents (or the rest of one cut off before) start: 0 and after every EOS,
    the separator that ends each framed document."""
    after = np.flatnonzero(np.asarray(seq)[:-1] == eos) + 1
    return np.concatenate([[0], after]).astype(np.int32)


def packed_document_ids(out_dir: str | Path) -> frozenset[str]:
    """The ids of the corpus documents a packing placed (its side files index the corpus view it packed)."""
    from ctxbench.trainers.data.shards import read_manifest
    from ctxbench.trainers.data.token_cache import TokenCorpus

    m = read_manifest(Path(out_dir))
    if m is None:
        raise ConfigError(f"data: {out_dir} has no manifest.json; pack it first")
    if m.config.get("mix_corpus"):
        raise ConfigError("mix_corpus: document ids are traced in the main corpus only; mix within one corpus")
    used: set[int] = set()
    for shard in m.shards:
        with np.load(Path(out_dir) / shard.replace(".npy", ".docs.npz")) as side:
            used.update(np.unique(side["doc_ids"]).tolist())
    names = TokenCorpus(Path(m.stats["corpus"]["dir"]), None, m.config["corpus"].get("max_doc_tokens")).doc_ids()
    return frozenset(names[d] for d in used)
