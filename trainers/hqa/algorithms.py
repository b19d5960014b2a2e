"""Algorithm 1 (hierarchical question order within a document) and Algorithm 2 (concatenating documents).

Both are pure functions of a document's shape (or its QA pools) and a numpy Generator, so their
statistics are tested without a generator model; data.py turns their steps into prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.hqa.prompts import SUMMARY_REQUEST

Level = Literal["global", "medium", "small"]
MOVES = ("deeper", "next_small", "next_medium")  # Algorithm 1, lines 19-25: each with probability 1/3


@dataclass(frozen=True)
class Step:
    """One hierarchical QA's context: the global summary, a medium section (its summary) or a small chunk."""

    level: Level
    medium: int | None = None
    small: int | None = None  # index within the medium
    move: str = "global"  # global, random_medium, first_small, deeper, next_small, next_medium


def _next_unvisited(current: int, size: int, visited: Callable[[int], bool]) -> int:
    """The next index after `current` in reading order, wrapping past the end to the first unvisited one;
    when all are visited, simply the next one (cyclically)."""
    for k in range(1, size + 1):
        candidate = (current + k) % size
        if not visited(candidate):
            return candidate
    return (current + 1) % size


def hierarchical_steps(shape: Sequence[int], n: int, rng) -> list[Step]:
    """The contexts of a document's n hierarchical QAs (Algorithm 1; §3.1, Fig. 2).

    shape[m] is the number of small chunks in medium section m. QA 1 is on the global summary, QA 2 on a
    random medium, QA 3 on that medium's first small chunk; after that each step goes uniformly deeper on
    the same small chunk, to the next small chunk, or to the next medium (whose first small chunk follows).
    """
    if not shape or min(shape) < 1:
        raise ValueError("a document needs at least one medium section with at least one small chunk")
    steps = [Step("global")]
    if n <= 1:
        return steps[:n]
    m = int(rng.integers(len(shape)))
    steps.append(Step("medium", m, None, "random_medium"))
    seen_medium, seen_small = {m}, set()
    small: int | None = None
    while len(steps) < n:
        if small is None:
            small, move = 0, "first_small"
        else:
            choice = MOVES[int(rng.integers(3))]
            if choice == "next_medium":
                m = _next_unvisited(m, len(shape), lambda x: x in seen_medium)
                seen_medium.add(m)
                small = None
                steps.append(Step("medium", m, None, choice))
                continue
            if choice == "next_small":
                small = _next_unvisited(small, shape[m], lambda s, m=m: (m, s) in seen_small)
            move = choice
        seen_small.add((m, small))
        steps.append(Step("small", m, small, move))
    return steps


@dataclass(frozen=True)
class DiverseSpec:
    """A diverse QA: an App. B prompt on one small chunk, or the multi-hop prompt on 2-4 chunks."""

    prompt: str
    chunks: tuple[int, ...]  # indices into the document's small chunks (flattened)


def diverse_specs(n_small: int, n: int, rng, *, prompts: Sequence[str], multihop_p: float,
                  hops: tuple[int, int] = (2, 4)) -> list[DiverseSpec]:
    """n diverse QA contexts (§3.1): a random prompt on a random small chunk, or with probability multihop_p
    (App. E: 0.2) a multi-hop prompt over 2-4 distinct chunks. A (prompt, chunks) pair is not repeated while
    unused pairs remain: a greedy generator would answer a repeated pair identically."""
    out: list[DiverseSpec] = []
    used: set[DiverseSpec] = set()
    for _ in range(n):
        for _attempt in range(32):
            if n_small >= 2 and rng.random() < multihop_p:
                k = int(rng.integers(hops[0], min(hops[1], n_small) + 1))
                spec = DiverseSpec("multihop", tuple(sorted(int(c) for c in rng.choice(n_small, size=k, replace=False))))
            else:
                spec = DiverseSpec(prompts[int(rng.integers(len(prompts)))], (int(rng.integers(n_small)),))
            if spec not in used:
                break
        used.add(spec)
        out.append(spec)
    return out


@dataclass
class DocumentQAs:
    """What Algorithm 2 needs of one document: its text, global summary and QA pools."""

    doc_id: str
    text: str
    summary: str
    hierarchical: list[dict[str, Any]]  # in Algorithm 1 order; each {"id", "question", "answer", ...}
    diverse: list[dict[str, Any]]
    next_hierarchical: int = 0
    unused_diverse: list[int] = field(default_factory=list)

    def __post_init__(self):
        self.unused_diverse = list(range(len(self.diverse)))


class Composition(BaseModel):
    """Algorithm 2's counts and the ablation axes of Table 7 (x-y-z: after each document, when revisiting)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    n1: int = Field(5, ge=0, description="hierarchical and diverse QAs after each document (§3.2 item 1: 5)")
    n2: int = Field(9, ge=0, description="diverse QAs from earlier documents' unused pools, after each later document (§3.2: 9)")
    n3: int = Field(3, ge=0, description="next hierarchical QAs of each earlier document, revisited with revisit_p (§3.2: 3)")
    revisit_p: float = Field(0.6, ge=0, le=1, description="probability of revisiting each earlier document (§3.2: 60%)")
    after: Literal["h", "s", "hs"] = Field("hs", description="QA types right after a document (Table 7's x and y): "
                                           "h hierarchical, s diverse, hs both; h or s alone takes both N1 slots")
    revisit: Literal["h", "s", "hs"] = Field("hs", description="QA types referring back to earlier documents (Table 7's z)")
    counts: Literal["fixed", "randomized"] = Field("fixed", description="fixed counts (§4.4: better), or each count drawn "
                                                   "uniformly from count_range (§4.4 a: 2-10)")
    count_range: tuple[int, int] = Field((2, 10), description="randomized counts: inclusive range")
    summary: bool = Field(True, description="the document turn asks for and is answered by the global summary; false = "
                          "Table 7's no-sum (the document opens its first question instead)")


def concatenate(docs: Sequence[DocumentQAs], rng, comp: Composition) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """One long conversation over K documents (Algorithm 2, §3.2) and, per QA turn, where it came from.

    For document i: the document with its summary request; its next N1 hierarchical QAs (in order) and N1
    diverse QAs; then N2 diverse QAs from the unused pools of documents 1..i-1, and, for each earlier document,
    with probability revisit_p its next N3 hierarchical QAs. With after='h' or 's' the one type takes both
    N1 slots. A pool that runs dry gives fewer QAs (counted by the caller from the turn log).
    """
    messages: list[dict[str, str]] = []
    turns: list[dict[str, Any]] = []
    pending_document: list[str | None] = [None]  # no-summary mode: the document opens the next user turn

    def count(n: int) -> int:
        return int(rng.integers(comp.count_range[0], comp.count_range[1] + 1)) if comp.counts == "randomized" else n

    def add(doc: int, kind: str, qa: dict[str, Any]) -> None:
        question = qa["question"]
        if pending_document[0] is not None:
            question, pending_document[0] = f"{pending_document[0]}\n\n{question}", None
        messages.extend([{"role": "user", "content": question}, {"role": "assistant", "content": qa["answer"]}])
        turns.append({"doc": doc, "kind": kind, "qa": qa["id"]})

    def hierarchical(doc: int, n: int, kind: str) -> None:
        d = docs[doc]
        for qa in d.hierarchical[d.next_hierarchical: d.next_hierarchical + n]:
            add(doc, kind, qa)
        d.next_hierarchical = min(len(d.hierarchical), d.next_hierarchical + n)

    def diverse(pool_docs: Sequence[int], n: int, kind: str) -> None:
        pool = [(j, k) for j in pool_docs for k in docs[j].unused_diverse]
        for idx in sorted(rng.choice(len(pool), size=min(n, len(pool)), replace=False).tolist()) if pool else []:
            j, k = pool[idx]
            docs[j].unused_diverse.remove(k)
            add(j, kind, docs[j].diverse[k])

    for i, d in enumerate(docs):
        if comp.summary:
            messages.extend([{"role": "user", "content": d.text + SUMMARY_REQUEST},
                             {"role": "assistant", "content": d.summary}])
            turns.append({"doc": i, "kind": "summary", "qa": f"{d.doc_id}/summary"})
        else:  # no-sum: the document opens its first QA's user turn
            pending_document[0] = d.text
        n1 = count(comp.n1)
        h_n, s_n = {"h": (2 * n1, 0), "s": (0, 2 * n1), "hs": (n1, n1)}[comp.after]
        hierarchical(i, h_n, "hierarchical")
        diverse([i], s_n, "diverse")
        if pending_document[0] is not None:  # no-sum and no QA to carry the document: it is left out
            pending_document[0] = None
            turns.append({"doc": i, "kind": "document_dropped", "qa": None})
        if i == 0:
            continue
        if "s" in comp.revisit:
            diverse(list(range(i)), count(comp.n2), "earlier_diverse")
        if "h" in comp.revisit:
            for j in range(i):
                if rng.random() < comp.revisit_p:
                    hierarchical(j, count(comp.n3), "revisit_hierarchical")
    return messages, turns


def draw_documents(n_docs: int, samples: int, k: int, rng) -> list[list[int]]:
    """K distinct documents per sample, walking random permutations of the corpus (reshuffled when used up)."""
    if n_docs < k:
        raise ConfigError(f"documents_per_sample: {k} documents per sample, but only {n_docs} documents are usable")
    order: list[int] = []
    out = []
    for _ in range(samples):
        pick: list[int] = []
        while len(pick) < k:
            if not order:
                order = rng.permutation(n_docs).tolist()
            d = order.pop(0)
            if d in pick:
                order.append(d)
                if all(x in pick for x in order):
                    order = []
                continue
            pick.append(d)
        out.append(pick)
    return out
