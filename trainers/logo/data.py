"""LOGO training data (§3.2.2, §4.1): the `logo` synthesis method (`synthesize("logo", config) -> manifest`).

Per QA sample: chunk the context, score the chunks, split at δ, and keep N chunks as the shared context C'
(every relevant chunk, the N highest-scoring if there are more, filled with random irrelevant ones, in
document order). The policy answers three kinds of prompt: the chosen reply sees C'’s relevant chunks;
rejected reply j sees irrelevant chunks only (even j) or a mix of about half the relevant chunks and
irrelevant ones, N in all (odd j). Samples without a relevant (or irrelevant) chunk, with a failed or
empty reply, or with a rejected reply equal to the chosen are dropped and counted. Each response is
trained on C' with synthetic position ids (positions.py).

Output directory: per shard, shard-NNNNN.{input_ids,labels,position_ids}.npy (flat int32, memory-mapped when
read), shard-NNNNN.offsets.npy (response boundaries; sample s owns responses s·(M+1) .. s·(M+1)+M, the chosen
first) and shard-NNNNN.jsonl (per-sample meta); manifest.json (written atomically after each shard, which is
listed only once all its files are in place; `complete` at the end); generations.jsonl (the generator client's call cache,
trainers/data/generator.py; in cache_dir if given). A rerun of a finished synthesis with the same inputs returns its
manifest, one of an unfinished one rebuilds the shards asking the generator only for prompts it has not answered, and
an out_dir holding other LOGO data is refused (trainers/data/synthesis.py).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxbench.harness.core.errors import ConfigError, CtxbenchError
from ctxbench.harness.core.identity import EXECUTION, identity_dump
from ctxbench.harness.core.io import atomic_write_json
from ctxbench.trainers.data.generator import GeneratorConfig, method_defaults
from ctxbench.trainers.data.synthesis import (
    Identity,
    content_hash,
    drop_counts,
    envelope,
    files_identity,
    finish,
    identity,
    identity_or_older,
    list_shard,
    read_manifest,
    register_synthesis,
    remove_unlisted,
)
from ctxbench.trainers.logo.chunks import SCORERS, Chunk, QASample, chunk_sample, load_samples, make_scorer, score_chunks
from ctxbench.trainers.logo.positions import Layout, choose_mode, prefix_positions, response_positions, slack

FORMAT = "logo-responses/1"
PAPER_SAMPLING = {"temperature": 0.7, "top_p": 0.95}  # the authors' decoding; backends decode greedily (recorded)
CONTEXT, QUESTION = "{context}", "{question}"
PROMPT = ("Answer the question using the passages below. Reply with the answer only.\n\n{context}\n\n"
          "Question: {question}")
_SENTINEL = "\x00LOGO-CONTEXT\x00"


class LogoDataConfig(BaseModel):
    """`ctxbench data logo --config FILE`: chosen and M rejected self-generated replies with synthetic positions."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    dataset: Literal["hotpotqa", "jsonl"] = Field("hotpotqa", description="hotpotqa (official/HF JSON) or jsonl lines "
                                                  "{question, context, answer?, id?}")
    data_file: str | None = Field(None, description="input file; default: <data_dir>/hotpotqa/*.json",
                                  json_schema_extra=EXECUTION)  # where: the identity names the file's content
    data_dir: str | None = Field(None, description="where hotpotqa/ lives; default env CTXBENCH_DATA_DIR",
                                 json_schema_extra=EXECUTION)
    max_samples: int | None = Field(None, ge=1, description="use at most this many input samples (the first ones)")
    chunk_tokens: int = Field(512, ge=8, description="tokens per chunk (paper 512)")
    num_chunks: int = Field(16, ge=1, description="N: chunks in the shared context C' (paper 16)")
    threshold: float = Field(6, description="δ: a chunk scoring >= δ is relevant (paper 6)")
    scorer: Literal["keywords", "lexical", "spacy_ner"] = Field("keywords", description=f"chunk importance: {', '.join(SCORERS)}"
                                                                " (spaCy ones need the optional spacy package)")
    spacy_model: str = Field("en_core_web_sm", description="spaCy pipeline for the spacy_ner and lexical scorers")
    score_with_answer: bool = Field(True, description="count the gold answer's keys too (the authors' code); False: question only (paper)")
    max_df: float = Field(0.5, gt=0, le=1, description="keys found in more than this fraction of a sample's chunks do not "
                          "count (1.0: the paper's plain overlap count)")
    num_rejected: int = Field(2, ge=1, description="M: rejected replies per sample (paper 2)")
    target_window: int = Field(ge=1, description="K: the window positions are spread over (short-context models: 8x their "
                               "window; long-context models: their window)")
    sparse_fraction: float = Field(0.1, ge=0, le=1, description="share of samples with sparse instead of continuous chunk "
                                   "positions (App. D: 9:1)")
    max_real_tokens: int | None = Field(None, ge=1, description="drop samples longer than this many real tokens (the authors' "
                                        "code: 10K; Llama-2 18K)")
    prompt: str = Field(PROMPT, description="task text with {context} and {question}")
    answer_prefix: str = Field("Answer:", description="start of the assistant turn, before the reply")
    chunk_separator: str = Field("\n\n", description="text between chunks (attached to the end of each chunk but the last)")
    generator: GeneratorConfig = Field(description="who writes the replies: the policy model itself (its model is the "
                                       "trainer's base_model; defaults here: max_new_tokens 64, template auto)")
    seed: int = Field(0, description="seed for chunk selection and positions")
    out_dir: str = Field("runs/data/logo", description="output directory (shards, manifest, generation cache)",
                         json_schema_extra=EXECUTION)
    cache_dir: str | None = Field(None, description="where the generator-call cache generations.jsonl lives; default "
                                  "out_dir (give another synthesis' out_dir to reuse its replies)", json_schema_extra=EXECUTION)
    shard_size: int = Field(256, ge=1, description="samples per shard", json_schema_extra=EXECUTION)

    @field_validator("generator", mode="before")
    @classmethod
    def _generator_defaults(cls, v):
        if isinstance(v, dict) and "answer_prefix" in v:
            raise ValueError("answer_prefix: LOGO's reply prefix is the top-level answer_prefix")
        return method_defaults(v, max_new_tokens=64, template="auto")

    @field_validator("prompt")
    @classmethod
    def _slots(cls, v):
        if v.count(CONTEXT) != 1 or v.count(QUESTION) != 1:
            raise ValueError("must contain {context} and {question} exactly once")
        return v


def load_config(path: Path, **overrides: Any) -> LogoDataConfig:
    """Read a data YAML; a bad key or value is one line naming it (overrides of None are ignored)."""
    from ctxbench.harness.core.config import load_config as load

    return load(path, LogoDataConfig, kind="data", expect="LOGO data settings", **overrides)


def data_file(cfg: LogoDataConfig) -> Path:
    if cfg.data_file:
        return Path(cfg.data_file).expanduser()
    root = cfg.data_dir or os.environ.get("CTXBENCH_DATA_DIR")
    if cfg.dataset != "hotpotqa" or not root:
        raise ConfigError("data_file: give the input file (or data_dir / --data-dir / CTXBENCH_DATA_DIR holding hotpotqa/)")
    found = sorted((Path(root) / "hotpotqa").glob("*.json"))
    if not found:
        raise ConfigError(f"data_dir: no hotpotqa/*.json under {root}")
    return found[0]


def logo_identity(cfg: LogoDataConfig, **_: Any) -> Identity:
    """The config (the generator by its fingerprint) and the input file's content; a missing input file, spaCy model
    or backend is refused here, before anything is written."""
    from ctxbench.harness.core import registry
    from ctxbench.trainers.data.generator import fingerprint, legacy_fingerprint

    source = data_file(cfg)
    make_scorer(cfg.scorer, spacy_model=cfg.spacy_model)
    registry.get("backend", cfg.generator.backend, field="generator.backend")
    config = {k: v for k, v in identity_dump(cfg).items() if k != "generator"}  # the generator: by its fingerprint
    ident = identity(config, files_identity([source], source), fingerprint(cfg.generator))
    older = replace(ident, generator=legacy_fingerprint(cfg.generator) or ident.generator)
    return identity_or_older(cfg.out_dir, ident, older)  # an out_dir an older ctxbench wrote keeps its identity


@dataclass(eq=False)
class Plan:
    """One kept sample: its chunks and scores, C' (context), and the chunk sets each reply is generated from."""

    sample: QASample
    chunks: list[Chunk]
    scores: np.ndarray
    context: list[int]
    relevant: list[int]
    prompts: list[list[int]]  # prompts[0]: the chosen reply's chunks; then one per rejected reply


def plan_sample(sample: QASample, chunks: list[Chunk], scores: np.ndarray, cfg: LogoDataConfig,
                rng: np.random.Generator) -> Plan | str:
    """The chunk sets of one sample, or the reason it is dropped."""
    n = cfg.num_chunks
    if len(chunks) < n:
        return "too_few_chunks"
    relevant = [i for i in range(len(chunks)) if scores[i] >= cfg.threshold]
    irrelevant = [i for i in range(len(chunks)) if scores[i] < cfg.threshold]
    if not relevant:
        return "no_relevant_chunk"
    if not irrelevant:
        return "no_irrelevant_chunk"
    keep = sorted(sorted(relevant, key=lambda i: (-scores[i], i))[:n])
    fill = rng.choice(irrelevant, size=n - len(keep), replace=False).tolist() if len(keep) < n else []
    prompts = [keep]
    for j in range(cfg.num_rejected):
        if j % 2 == 0:  # irrelevant chunks only
            prompts.append(sorted(rng.choice(irrelevant, size=min(n, len(irrelevant)), replace=False).tolist()))
        else:  # partially relevant: about half the relevant chunks, irrelevant ones up to N
            some = rng.choice(keep, size=max(1, len(keep) // 2), replace=False).tolist()
            more = rng.choice(irrelevant, size=min(n - len(some), len(irrelevant)), replace=False).tolist()
            prompts.append(sorted(some + more))
    return Plan(sample, chunks, scores, sorted(keep + fill), keep, prompts)


def _reused(out_dir: Path) -> dict[str, Any]:
    return {**read_manifest(out_dir), "reused": True}  # finished with the same inputs: nothing to do


def _plans(cfg: LogoDataConfig, tok, renderer, samples: list[QASample], drops: Counter[str]) -> tuple[list[Plan], dict]:
    """Chunk, score and split every sample; keep the ones that fit the window, with their token pieces."""
    keys = make_scorer(cfg.scorer, spacy_model=cfg.spacy_model)
    sep_ids = tok(cfg.chunk_separator, add_special_tokens=False)["input_ids"] if cfg.chunk_separator else []
    plans: list[Plan] = []
    most_chunks = 0
    for i, s in enumerate(samples):
        chunks = chunk_sample(tok, s, cfg.chunk_tokens)
        most_chunks = max(most_chunks, len(chunks))
        scores = score_chunks(keys, s.question, s.answer, chunks, with_answer=cfg.score_with_answer, max_df=cfg.max_df)
        p = plan_sample(s, chunks, scores, cfg, np.random.default_rng([cfg.seed, i]))
        if isinstance(p, str):
            drops[p] += 1
        else:
            plans.append(p)
    if cfg.num_chunks > most_chunks:
        raise ConfigError(f"num_chunks: N={cfg.num_chunks} but no sample has more than {most_chunks} chunks of "
                          f"{cfg.chunk_tokens} tokens; lower num_chunks or chunk_tokens")
    pieces = {id(p): _pieces(renderer, tok, cfg, p, sep_ids) for p in plans}
    plans = _fit_window(plans, pieces, cfg, drops)
    if not plans:
        raise ConfigError(f"nothing left after filtering {len(samples)} samples ({_counts(drops)}); lower threshold or "
                          "num_chunks, or check the scorer")
    return plans, pieces


def _ask(cfg: LogoDataConfig, plans: list[Plan], client, progress) -> list[list[str]]:
    """Every reply of every plan (the chosen one's chunks first) through the generator client; their call keys."""
    calls: dict[str, tuple[str, str]] = {}
    wanted = []
    for p in plans:
        ks = []
        for chunk_ids in p.prompts:
            text = cfg.prompt.replace(CONTEXT, cfg.chunk_separator.join(p.chunks[c].text for c in chunk_ids))
            text = text.replace(QUESTION, p.sample.question)
            ks.append(client.key(text, cfg.answer_prefix))
            calls.setdefault(ks[-1], (text, cfg.answer_prefix))
        wanted.append(ks)
    client.ensure(calls, progress)
    return wanted


def _manifest(cfg: LogoDataConfig, ident: Identity, source: Path, tok, client, n_input: int) -> dict[str, Any]:
    from ctxbench.harness.core.models import tokenizer_fingerprint

    g = cfg.generator
    return {
        **envelope("logo", ident), "format": FORMAT, "config_hash": ident.hash, "config": cfg.model_dump(mode="json"),
        "source": str(source), "tokenizer": g.model, "tokenizer_fingerprint": tokenizer_fingerprint(tok),
        "generator": {"model": g.model, "backend": g.backend, "backend_args": g.backend_args, "fingerprint": client.fingerprint,
                      "max_new_tokens": g.max_new_tokens, "decoding": "greedy", "paper_sampling": PAPER_SAMPLING,
                      "deviation": "backends decode greedily; the authors sample with temperature 0.7, top-p 0.95"},
        "scorer": cfg.scorer, "threshold": cfg.threshold, "num_chunks": cfg.num_chunks, "num_rejected": cfg.num_rejected,
        "target_window": cfg.target_window, "chunk_tokens": cfg.chunk_tokens, "sparse_fraction": cfg.sparse_fraction,
        "responses_per_sample": cfg.num_rejected + 1, "input_samples": n_input, "samples": 0, "real_tokens": 0,
        "max_real_length": 0, "modes": {"continuous": 0, "sparse": 0}, "calls": dict(client.counts), "shards": [],
        "shard_samples": [],
    }


@register_synthesis("logo", LogoDataConfig, identity=logo_identity, load=_reused, extra="train",
                    extra_modules=("transformers",), produces="logo", trainer="logo")
def _logo(cfg: LogoDataConfig, ident: Identity, *, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """LOGO: the policy answers from relevant, irrelevant and mixed chunks; chosen + M rejected replies, synthetic positions."""
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.trainers.data.generator import GeneratorClient

    out = Path(cfg.out_dir)
    source = data_file(cfg)
    tok = load_tokenizer(cfg.generator.model)
    client = GeneratorClient(cfg.generator, cache_file=Path(cfg.cache_dir or out) / "generations.jsonl", tokenizer=tok)
    samples = load_samples(cfg.dataset, source, limit=cfg.max_samples)
    drops: Counter[str] = Counter()
    plans, pieces = _plans(cfg, tok, client.renderer, samples, drops)
    wanted = _ask(cfg, plans, client, progress)
    remove_unlisted(out, set(), ("shard-*.npy", "shard-*.jsonl"))
    manifest = _manifest(cfg, ident, source, tok, client, len(samples))
    buffer: list[tuple[list[np.ndarray], dict[str, Any]]] = []
    for i, (p, ks) in enumerate(zip(plans, wanted)):
        built = _build(p, pieces[id(p)], [client.reply(k) for k in ks], cfg, tok, np.random.default_rng([cfg.seed, i, 1]))
        if isinstance(built, str):
            drops[built] += 1
            continue
        buffer.append(built)
        if len(buffer) >= cfg.shard_size:
            _flush(out, manifest, buffer, drops)
    _flush(out, manifest, buffer, drops)
    calls = manifest["calls"]
    if calls["failed"]:  # stays incomplete: the next run asks again for exactly the failed replies
        raise CtxbenchError(f"generator: {calls['failed']} of {sum(map(len, wanted))} calls failed ({calls['first_error']}); "
                            "rerun the same command to retry them")
    if not manifest["samples"]:
        raise ConfigError(f"nothing left after filtering {len(samples)} samples ({_counts(drops)}); the generator's replies "
                          "were empty or equal; raise generator.max_new_tokens or check the generator")
    manifest["data_hash"] = content_hash([ident.hash, manifest["shards"], manifest["real_tokens"]])
    return finish(out, manifest, drops)


def _counts(drops: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in drops.most_common()) or "none dropped"


def _pieces(renderer, tok, cfg: LogoDataConfig, p: Plan, sep_ids: list[int]) -> dict[str, Any]:
    """Token ids of the template head, the chunk runs of C' and the tail (question, answer prefix)."""
    task = cfg.prompt.replace(QUESTION, p.sample.question).replace(CONTEXT, _SENTINEL)
    rendered = renderer.render(task, cfg.answer_prefix)
    if rendered.text.count(_SENTINEL) != 1:
        raise ConfigError(f"generator.template: the {renderer.template!r} template rewrote the task text, so the context "
                          "cannot be located in the prompt; use template: plain")
    head, tail = rendered.text.split(_SENTINEL)
    runs = [list(p.chunks[c].ids) + (sep_ids if k < len(p.context) - 1 else []) for k, c in enumerate(p.context)]
    return {"head": tok(head, add_special_tokens=rendered.add_special_tokens)["input_ids"], "runs": runs,
            "tail": tok(tail, add_special_tokens=False)["input_ids"]}


def _fit_window(plans: list[Plan], pieces: dict[int, dict[str, Any]], cfg: LogoDataConfig, drops: Counter[str]) -> list[Plan]:
    """Drop samples whose prompt alone passes max_real_tokens; refuse a window K that leaves Δ < 1 for the longest
    sample with the longest possible reply (capped at max_real_tokens: longer samples are dropped after generation)."""
    kept, worst = [], 0
    for p in plans:
        x = pieces[id(p)]
        layout = Layout(len(x["head"]), tuple(map(len, x["runs"])), len(x["tail"]), (cfg.generator.max_new_tokens + 1,))
        if cfg.max_real_tokens and layout.prefix >= cfg.max_real_tokens:
            drops["too_long"] += 1
            continue
        kept.append(p)
        worst = max(worst, min(layout.real_length, cfg.max_real_tokens or layout.real_length))
    k, K, n = worst, cfg.target_window, cfg.num_chunks
    if kept and K <= k:
        raise ConfigError(f"target_window: K={K} <= k={k}, the real length of the longest sample (with a "
                          f"{cfg.generator.max_new_tokens}-token reply); raise target_window or lower num_chunks, "
                          "chunk_tokens or generator.max_new_tokens (or set max_real_tokens)")
    if kept and (K - k) // n < 1:
        raise ConfigError(f"target_window: K={K} leaves Δ=⌊(K-k)/N⌋={(K - k) // n} < 1 spare positions per chunk "
                          f"(k={k}, N={n}); raise target_window")
    return kept


def _build(p: Plan, x: dict[str, Any], replies: list[dict[str, Any] | None], cfg: LogoDataConfig, tok,
           rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]] | str:
    """Input ids, labels and position ids of the M + 1 responses of one sample, or why it is dropped."""
    if any(r is None for r in replies):
        return "generation_failed"
    texts = [r["text"] for r in replies]
    if any(not t.strip() for t in texts):
        return "empty_reply"
    if any(t.strip() == texts[0].strip() for t in texts[1:]):
        return "rejected_equals_chosen"
    cap = cfg.generator.max_new_tokens  # re-tokenizing a decoded reply may add a token; the window check assumed cap + 1
    answers = [tok(t, add_special_tokens=False)["input_ids"][:cap] + ([tok.eos_token_id] if r["finished"] else [])
               for t, r in zip(texts, replies)]
    prefix = list(x["head"]) + [t for run in x["runs"] for t in run] + list(x["tail"])
    layout = Layout(len(x["head"]), tuple(map(len, x["runs"])), len(x["tail"]), tuple(map(len, answers)))
    if cfg.max_real_tokens and layout.real_length > cfg.max_real_tokens:
        return "too_long"
    mode = choose_mode(rng, cfg.sparse_fraction)
    pos = prefix_positions(layout, cfg.target_window, mode, rng)
    arrays = []
    for a in answers:
        arrays += [np.asarray(prefix + a, np.int32), np.asarray([-100] * len(prefix) + a, np.int32),
                   response_positions(pos, len(a)).astype(np.int32)]
    meta = {"id": p.sample.id, "question": p.sample.question, "gold": p.sample.answer, "chosen": texts[0],
            "rejected": texts[1:], "mode": mode, "real_length": layout.real_length, "prefix": layout.prefix,
            "layout": {"head": layout.head, "chunks": list(layout.chunks), "tail": layout.tail, "answers": list(layout.answers)},
            "delta": slack(layout, cfg.target_window), "context_chunks": p.context, "relevant_chunks": p.relevant,
            "prompt_chunks": p.prompts, "scores": [float(s) for s in p.scores]}
    return arrays, meta


def _flush(out: Path, manifest: dict[str, Any], buffer: list, drops: Counter[str]) -> None:
    """Write buffered samples as one shard (.npy arrays + meta) and list it (trainers/data/synthesis.list_shard)."""
    manifest["drops"] = drop_counts(drops)
    if not buffer:  # the drops so far, even with no shard to list
        atomic_write_json(out / "manifest.json", manifest)
        return
    ids, labels, pos = ([a for arrays, _ in buffer for a in arrays[k::3]] for k in range(3))
    offsets = np.concatenate([[0], np.cumsum([len(a) for a in ids])]).astype(np.int64)
    files: dict[str, Any] = {f".{key}.npy": (lambda f, a=arr: np.save(f, a)) for key, arr in (
        ("input_ids", np.concatenate(ids)), ("labels", np.concatenate(labels)), ("position_ids", np.concatenate(pos)),
        ("offsets", offsets))}
    files[".jsonl"] = "".join(json.dumps(m, ensure_ascii=False) + "\n" for _, m in buffer)
    manifest["shard_samples"].append(len(buffer))
    manifest["samples"] += len(buffer)
    manifest["real_tokens"] += int(offsets[-1])
    manifest["max_real_length"] = max([manifest["max_real_length"], *(m["real_length"] for _, m in buffer)])
    for _, m in buffer:
        manifest["modes"][m["mode"]] += 1
    list_shard(out, manifest, f"shard-{len(manifest['shards']):05d}", files)
    buffer.clear()
