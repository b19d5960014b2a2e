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
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write
from ctxbench.trainers.data.corpus import CorpusConfig, load_corpus
from ctxbench.trainers.data.methods import get_method, parse_args
from ctxbench.trainers.data.packing import Framer, Mixer, StreamPacker, load_state, save_state
from ctxbench.trainers.data.shards import Manifest, ShardWriter, config_hash, read_manifest

SHARD_TOKENS = 16 * 1024 * 1024
_TOKENIZERS: dict[str, Any] = {}


class SynthesisConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    corpus: CorpusConfig = Field(description="where the documents come from and how to read them")
    method: str = Field(description="packing method: standard, within_domain, splice, quest, knn or iclm")
    method_args: dict[str, Any] = Field(default_factory=dict, description="the method's arguments (see "
                                        "`ctxbench data methods`), e.g. splice: {retriever: bm25, k: 1, order: identity}")
    seq_len: int = Field(ge=16, description="tokens per training sequence (every sequence is exactly this long)")
    budget_tokens: int = Field(ge=1, description="tokens to synthesize; rounded up to whole sequences")
    mix_ratio: float = Field(0.0, ge=0, le=1, description="fraction of sequences from standard packing, interleaved "
                                                          "(the papers use 0.5)")
    mix_corpus: CorpusConfig | None = Field(None, description="corpus for the standard-packing share (default: corpus)")
    tokenizer: str = Field(description="alias, HF directory or .gguf for harness.models.load_tokenizer")
    seed: int = Field(0, description="seed of every random choice; same config + seed = same shards")
    out_dir: str = Field(description="directory for shards, side files and manifest.json")
    shard_size: int = Field(0, ge=0, description="sequences per shard; 0 = about 16M tokens per shard")
    cache_dir: str | None = Field(None, description="token/index cache root (default: $CTXBENCH_CACHE/corpora)")


def load_config(path: str | Path, **overrides: Any) -> SynthesisConfig:
    """Read a YAML synthesis config; validation errors become one-line ConfigErrors naming the key."""
    from ctxbench.harness.core.config import one_line, read_yaml_mapping, resolve_config

    p = resolve_config(path, kind="data", field="--config")
    raw = read_yaml_mapping(p, field="--config", expect="config keys (corpus, method, seq_len, ...)")
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        cfg = SynthesisConfig(**raw)
    except ValidationError as e:
        raise ConfigError(one_line(e, p.name)) from None
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
    """Remove anything a killed run wrote past the manifest (shards not listed, newer states, temp files)."""
    for f in out.iterdir():
        stem = f.name.split(".")[0]
        idx = int(stem.split("-")[1]) if stem.startswith(("shard-", "state-")) and stem[6:].isdigit() else None
        if ".tmp" in f.name or (idx is not None and (idx > n or (idx == n and stem.startswith("shard-")))):
            f.unlink()


class _Writer(ShardWriter):
    def __init__(self, out: Path, manifest: Manifest, shard_size: int, before_listing: Callable[[int], None]):
        super().__init__(out, manifest, shard_size)
        self.before_listing = before_listing

    def flush(self, **stats: Any) -> None:
        if self.buffer:
            self.before_listing(len(self.manifest.shards))
        super().flush(**stats)


def synthesize(config: SynthesisConfig, *, progress: Callable[[int, int], None] | None = None,
               tokenizer=None) -> Manifest:
    """Write config.budget_tokens of packed sequences to config.out_dir; resumes a partial run, returns a
    finished one as is. progress(tokens_done, tokens_total) is called after every shard. One process writes
    an out_dir at a time: a second is refused with one line naming the first (its cleanup would delete the
    first one's shards)."""
    from ctxbench.harness.core.locks import output_writer

    done = read_manifest(Path(config.out_dir))
    if done is not None and done.complete and done.config_hash == _config_hash(config):
        return done  # finished: nothing to write, no lock needed
    with output_writer(config.out_dir, what=f"out_dir {config.out_dir}", fix="wait for it to finish, or give another out_dir"):
        return _synthesize(config, progress=progress, tokenizer=tokenizer)


def _config_hash(config: SynthesisConfig) -> str:
    """What the packing depends on, not where it is written."""
    cfg = config.model_dump(mode="json", exclude={"out_dir", "cache_dir"})
    cfg["method_args"] = parse_args(config.method, config.method_args).model_dump(mode="json")
    return config_hash(cfg)


def _synthesize(config: SynthesisConfig, *, progress: Callable[[int, int], None] | None, tokenizer) -> Manifest:
    out = Path(config.out_dir)
    spec = get_method(config.method)
    args = parse_args(config.method, config.method_args)
    cfg = config.model_dump(mode="json", exclude={"out_dir", "cache_dir"})
    cfg["method_args"] = args.model_dump(mode="json")
    h = config_hash(cfg)
    manifest = read_manifest(out)
    if manifest is not None and manifest.config_hash != h:
        raise ConfigError(f"out_dir: {out} holds a synthesis with a different config; use another out_dir or delete it")
    if manifest is not None and manifest.complete:
        return manifest

    t0 = time.perf_counter()
    tok = tokenizer if tokenizer is not None else _tokenizer(config.tokenizer)
    bos, eos = _separators(tok)
    corpus = _corpus(config.corpus, tok, config.cache_dir)
    t_corpus = time.perf_counter()
    framer = Framer(corpus, config.seq_len, bos, eos)
    if corpus.num_tokens + framer.nsep * len(corpus) < config.seq_len:
        raise ConfigError(f"seq_len: the corpus holds {corpus.num_tokens} tokens in {len(corpus)} documents, less than "
                          f"one sequence of {config.seq_len}; use a larger corpus or a smaller seq_len")
    packer = spec.build(framer=framer, args=args, seed=config.seed)
    domain_names = list(corpus.domain_names)
    mix, mix_offset = corpus, 0
    if config.mix_ratio > 0:
        mix = corpus if config.mix_corpus is None else _corpus(config.mix_corpus, tok, config.cache_dir)
        if mix is not corpus:
            mix_offset = len(domain_names)
            domain_names += mix.domain_names
        packer = Mixer(packer, StreamPacker(Framer(mix, config.seq_len, bos, eos), config.seed + 1), config.mix_ratio)
    t_prepared = time.perf_counter()

    total = math.ceil(config.budget_tokens / config.seq_len)
    shard_size = config.shard_size or max(1, SHARD_TOKENS // config.seq_len)
    if manifest is None:
        out.mkdir(parents=True, exist_ok=True)
        _cleanup(out, 0)
        manifest = Manifest(method=config.method, seq_len=config.seq_len, tokenizer=config.tokenizer, config=cfg,
                            config_hash=h)
    else:
        if manifest.stats.get("corpus", {}).get("key", corpus.key) != corpus.key:
            raise ConfigError(f"corpus.path: the corpus changed since {out} was started (different files or sizes); "
                              "delete out_dir to pack the new corpus")
        _cleanup(out, len(manifest.shards))
        if manifest.shards:
            packer.load_state(load_state(out / f"state-{len(manifest.shards):05d}.npz"))
    manifest.stats.update({"corpus": {"key": corpus.key, "dir": str(corpus.dir), "docs": len(corpus),
                                      "tokens": corpus.num_tokens}, "domain_names": domain_names,
                           "separators": {"bos": bos, "eos": eos}, "target_sequences": total})
    seqs_docs: list[list[int]] = []
    sources: list[int] = []
    continued: list[bool] = []
    timing = manifest.stats.setdefault("timing", {"pack_seconds": 0.0})
    timing.update({"load_corpus_seconds": round(t_corpus - t0, 3), "prepare_seconds": round(t_prepared - t_corpus, 3)})
    t_last = time.perf_counter()

    def before_listing(n: int) -> None:
        nonlocal t_last
        lens = np.array([len(d) for d in seqs_docs], dtype=np.int64)
        ids = np.array([d for ds in seqs_docs for d in ds], dtype=np.int64)
        src = np.repeat(np.array(sources, dtype=np.int8), lens)
        dom = np.zeros(len(ids), dtype=np.int32)
        own = (src == 0) | (mix is corpus)
        dom[own] = corpus.domains[ids[own]]
        dom[~own] = mix.domains[ids[~own]] + mix_offset
        atomic_write(out / f"shard-{n:05d}.docs.npz", lambda f: np.savez(
            f, offsets=np.concatenate([[0], np.cumsum(lens)]), doc_ids=ids.astype(np.int32), domains=dom,
            source=np.array(sources, dtype=np.int8), continued=np.array(continued, dtype=bool)))
        save_state(out / f"state-{n + 1:05d}.npz", packer.state())
        now = time.perf_counter()
        timing["pack_seconds"] = round(timing["pack_seconds"] + now - t_last, 3)
        t_last = now
        manifest.stats["methods"] = packer.summary() if isinstance(packer, Mixer) else {packer.name: packer.summary()}
        seqs_docs.clear()
        sources.clear()
        continued.clear()

    writer = _Writer(out, manifest, shard_size, before_listing)
    while manifest.num_sequences + len(writer.buffer) < total:
        src = packer.next_source() if isinstance(packer, Mixer) else 0
        seq, docs = packer.next()
        seqs_docs.append(docs)
        sources.append(src)
        continued.append(packer.continued)
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



def packed_document_ids(out_dir: str | Path) -> frozenset[str]:
    """The ids of the corpus documents a packing placed (its side files index the corpus view it packed)."""
    from ctxbench.trainers.data.corpus import TokenCorpus
    from ctxbench.trainers.data.shards import read_manifest

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
