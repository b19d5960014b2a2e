"""The per-document pools of the `hqa` synthesis (§3.1, Algorithm 1, App. B): each document's summaries (small
chunks, then mediums, then the whole), its hierarchical QAs and its diverse QAs, batched across documents so every
generator call is one batch. Randomness is seeded per document id, so a document's pool never depends on which
other documents share the batch (trainers/hqa/data.py drives the whole synthesis).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxbench.trainers.hqa import prompts
from ctxbench.trainers.hqa.algorithms import DocumentQAs, diverse_specs, hierarchical_steps
from ctxbench.trainers.hqa.generate import Generator
from ctxbench.trainers.hqa.split import Hierarchy

if TYPE_CHECKING:  # the config's module imports this one
    from ctxbench.trainers.hqa.data import HQADataConfig


def _doc_rng(seed: int, doc_id: str, stream: int):
    return np.random.default_rng([seed, stream, int(hashlib.sha256(doc_id.encode()).hexdigest()[:12], 16)])


def build_pools(docs: list[Hierarchy], gen: Generator, cfg: HQADataConfig) -> list[DocumentQAs | None]:
    """Summaries, hierarchical QAs (Algorithm 1) and diverse pools of each document, batched across documents.
    None for a document whose global summary could not be generated (counted)."""
    medium, glob = _summaries(docs, gen, cfg.word_limit)
    hier = _hierarchical_qas(docs, gen, cfg, medium, glob)
    div = _diverse_qas(docs, gen, cfg, glob)
    return [DocumentQAs(d.doc_id, d.text, glob[i], hier[i], div[i]) if glob[i] is not None else None
            for i, d in enumerate(docs)]


def _summaries(docs: list[Hierarchy], gen: Generator, wl: int) -> tuple[list[list[str | None]], list[str | None]]:
    """Small chunks, then each medium from its chunks' summaries, then the document from the mediums' (§3.1)."""
    small = gen.summaries([prompts.summary(c, wl) for d in docs for c in d.smalls], "summary_small")
    it = iter(small)
    small_by_doc = [[[next(it) for _ in m] for m in d.mediums] for d in docs]
    joined = [["\n".join(s for s in m if s) for m in doc] for doc in small_by_doc]
    flat = [(i, j) for i, doc in enumerate(joined) for j, text in enumerate(doc) if text]  # no chunk summary: none
    medium: list[list[str | None]] = [[None] * len(d.mediums) for d in docs]
    for (i, j), s in zip(flat, gen.summaries([prompts.summary(joined[i][j], wl) for i, j in flat], "summary_medium")):
        medium[i][j] = s
    have = [i for i, m in enumerate(medium) if any(m)]
    glob: list[str | None] = [None] * len(docs)
    for i, s in zip(have, gen.summaries([prompts.summary("\n".join(s for s in medium[i] if s), wl) for i in have],
                                        "summary_global")):
        glob[i] = s
    return medium, glob


def _hierarchical_qas(docs: list[Hierarchy], gen: Generator, cfg: HQADataConfig, medium: list[list[str | None]],
                      glob: list[str | None]) -> list[list[dict[str, Any]]]:
    """Algorithm 1, one step of every document per batch (a specific QA sees the questions asked of its chunk)."""
    steps = [hierarchical_steps(d.shape, cfg.hierarchical_per_document, _doc_rng(cfg.seed, d.doc_id, 1)) for d in docs]
    hier: list[list[dict[str, Any]]] = [[] for _ in docs]
    asked: list[dict[tuple[int, int], list[str]]] = [{} for _ in docs]
    for t in range(cfg.hierarchical_per_document):
        todo, texts = [], []
        for i, d in enumerate(docs):
            if glob[i] is None or t >= len(steps[i]):
                continue
            st = steps[i][t]
            if st.level == "global":
                text = prompts.qa(prompts.GENERAL, glob[i])
            elif st.level == "medium":
                if medium[i][st.medium] is None:
                    gen.drops["hierarchical:no_summary"] += 1
                    continue
                text = prompts.qa(prompts.GENERAL, medium[i][st.medium])
            else:
                text = prompts.qa(prompts.SPECIFIC, d.mediums[st.medium][st.small], asked[i].get((st.medium, st.small), []))
            todo.append(i)
            texts.append(text)
        for i, qa in zip(todo, gen.qas(texts, "hierarchical")):
            if qa is None:
                continue
            st = steps[i][t]
            if st.level == "small":
                asked[i].setdefault((st.medium, st.small), []).append(qa.question)
            hier[i].append({"id": f"{docs[i].doc_id}/h{t}", "question": qa.question, "answer": qa.answer, "level": st.level,
                            "medium": st.medium, "small": st.small, "move": st.move})
    return hier


def _diverse_qas(docs: list[Hierarchy], gen: Generator, cfg: HQADataConfig,
                 glob: list[str | None]) -> list[list[dict[str, Any]]]:
    """The diverse pool: one prompt of App. B per QA, multi-hop over 2-4 small chunks with probability multihop_p."""
    specs = [diverse_specs(len(d.smalls), cfg.diverse_per_document, _doc_rng(cfg.seed, d.doc_id, 2),
                           prompts=list(prompts.DIVERSE), multihop_p=cfg.multihop_p, hops=cfg.multihop_chunks) for d in docs]
    owners, texts = [], []
    for i, d in enumerate(docs):
        if glob[i] is None:
            continue
        for k, sp in enumerate(specs[i]):
            smalls = d.smalls
            texts.append(prompts.multihop([smalls[c] for c in sp.chunks]) if sp.prompt == "multihop"
                         else prompts.qa(prompts.DIVERSE[sp.prompt], smalls[sp.chunks[0]]))
            owners.append((i, k))
    div: list[list[dict[str, Any]]] = [[] for _ in docs]
    for (i, k), qa in zip(owners, gen.qas(texts, "diverse")):
        if qa is not None:
            sp = specs[i][k]
            div[i].append({"id": f"{docs[i].doc_id}/d{k}", "question": qa.question, "answer": qa.answer, "prompt": sp.prompt,
                           "chunks": list(sp.chunks)})
    return div
