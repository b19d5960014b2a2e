"""RULER question answering: a real question whose gold paragraph(s) hide among distractor documents.

qa_1 uses SQuAD 2.0 dev (answerable questions only), qa_2 HotpotQA dev (distractor setting). As in
the reference, the documents are the question's gold paragraph(s), then the other paragraphs that
come with the question (the rest of the SQuAD article, the HotpotQA distractor paragraphs), then
random paragraphs of the whole set, repeated if the length asks for more than the set has; the
chosen documents are shuffled. The number of documents grows with the length.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from ctxbench.harness.core.additivity import refused
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.fitting import fit_units
from ctxbench.harness.core.io import cached_npy
from ctxbench.tasks.base import Task, TaskArgs, rendered_edges, sample_seed
from ctxbench.tasks.haystacks import download_once, sequence_cum

TEMPLATE = (
    "Answer the question based on the given documents. Only give me the answer and do not output any other words.\n\n"
    "The following are given documents.\n\n{context}\n\n"
    "Answer the question based on the given documents. Only give me the answer and do not output any other words.\n\n"
    "Question: {query}"
)
ANSWER_PREFIX = " Answer:"
DOCUMENT = "Document {i}:\n{document}"
URLS = {
    "squad": ("https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v2.0.json", "squad-dev-v2.0.json"),
    "hotpotqa": ("http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json", "hotpot_dev_distractor_v1.json"),
}


class QaArgs(TaskArgs):
    dataset: Literal["squad", "hotpotqa"] = Field("squad", description="squad: SQuAD 2.0 dev; hotpotqa: HotpotQA dev, distractor setting")
    data_file: str | None = Field(None, description="the dataset's official JSON file; default: data_dir/squad/dev-v2.0.json or data_dir/hotpotqa/*.json, else a one-time download")
    depths: list[float] | None = Field(None, description="depth (percent of context) of the gold document(s), used in turn; random as in the reference when unset")
    tokens_to_generate: int = Field(32, ge=1, description="tokens reserved for the answer")
    template: str = Field(TEMPLATE, description="task text with {context} and {query}")
    answer_prefix: str = Field(ANSWER_PREFIX, description="start of the assistant turn")

    @model_validator(mode="after")
    def _check(self):
        if self.depths is not None:
            if not self.depths:
                raise ValueError("depths: give at least one depth")
            if any(not 0 <= d <= 100 for d in self.depths):
                raise ValueError("depths: each depth must be a percentage between 0 and 100")
        return self


@dataclass(frozen=True)
class Question:
    question: str
    answers: tuple[str, ...]
    gold: tuple[int, ...]  # documents that must be present (their depths are recorded)
    more: tuple[int, ...]  # the question's other documents, added before random distractors


@dataclass(frozen=True)
class QaData:
    docs: list[str]  # unique, sorted
    questions: list[Question]


def read_squad(path: Path) -> QaData:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    docs = sorted({p["context"] for art in data for p in art["paragraphs"]})
    idx = {d: i for i, d in enumerate(docs)}
    questions = []
    for art in data:
        article = [idx[p["context"]] for p in art["paragraphs"]]
        for p in art["paragraphs"]:
            gold = idx[p["context"]]
            more = tuple(i for i in article if i != gold)
            for qa in p["qas"]:
                if qa.get("is_impossible"):
                    continue
                answers = tuple(dict.fromkeys(a["text"] for a in qa["answers"]))
                if answers:
                    questions.append(Question(qa["question"], answers, (gold,), more))
    return QaData(docs, questions)


def title_sentence_pairs(context) -> list[tuple[str, list[str]]]:
    """(title, sentences) pairs from the official format ([[title, sentences]]) or the HF datasets one ({title: [], sentences: []})."""
    if isinstance(context, dict):
        return list(zip(context["title"], context["sentences"]))
    return [(t, s) for t, s in context]


def _supporting_titles(facts) -> set[str]:
    if isinstance(facts, dict):
        return set(facts.get("title", []))
    return {f[0] for f in facts or []}


def read_hotpotqa(path: Path) -> QaData:
    data = json.loads(path.read_text(encoding="utf-8"))
    text = lambda t, s: f"{t}\n{''.join(s)}"  # noqa: E731
    docs = sorted({text(t, s) for d in data for t, s in title_sentence_pairs(d["context"])})
    idx = {d: i for i, d in enumerate(docs)}
    questions = []
    for d in data:
        pairs = title_sentence_pairs(d["context"])
        own = list(dict.fromkeys(idx[text(t, s)] for t, s in pairs))
        support = _supporting_titles(d.get("supporting_facts"))
        # the supporting paragraphs are the gold; the question's other paragraphs come next, as in the reference
        gold = list(dict.fromkeys(idx[text(t, s)] for t, s in pairs if t in support)) or own
        questions.append(Question(d["question"], (d["answer"],), tuple(gold), tuple(i for i in own if i not in gold)))
    return QaData(docs, questions)


def read_qa(dataset: str, path: Path) -> QaData:
    """The official file, or one line naming it when it is corrupt or not in the dataset's format."""
    fmt = {"squad": "SQuAD 2.0 JSON ({'data': [articles with paragraphs and qas]})",
           "hotpotqa": "HotpotQA JSON (a list of records with question, answer and context)"}[dataset]
    try:
        return (read_squad if dataset == "squad" else read_hotpotqa)(path)
    except json.JSONDecodeError as e:
        raise ConfigError(f"data_file: {path} is not valid JSON (line {e.lineno}: {e.msg}); give the official {fmt}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"data_file: {path} is not UTF-8 text; give the official {fmt}") from None
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ConfigError(f"data_file: {path} is not in the {dataset} format ({type(e).__name__}: {e}); "
                          f"give the official {fmt}") from None
    except OSError as e:
        raise ConfigError(f"data_file: cannot read {path} ({e.strerror or e})") from None


class QA(Task):
    Args = QaArgs
    category = "question answering"
    summary = "question answering over {dataset} paragraphs padded with distractor paragraphs"

    def prepare(self, ctx: GenContext) -> None:
        self._data(ctx)

    def _data(self, ctx: GenContext) -> tuple[Path, QaData]:
        path = self._path(ctx)
        data: QaData = ctx.cached(("qa-data", self.args.dataset, str(path)), lambda: read_qa(self.args.dataset, path))
        if not data.questions:
            raise ConfigError(f"data_file: no usable questions in {path}; give the official file")
        return path, data

    def data_files(self, ctx: GenContext):
        return [self._path(ctx)]

    def data_needs(self) -> str:
        return {"squad": "squad/dev-v2.0.json (SQuAD 2.0 dev)", "hotpotqa": "hotpotqa/*.json (HotpotQA dev, distractor)"}[
            self.args.dataset] + "; downloaded once if no --data-dir"
    metric = "string_match_part"

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        path, data = self._data(ctx)
        doc_costs = self._doc_costs(ctx, data, path)
        order = ctx.cached(("qa-order", a.dataset, str(path), seed), lambda: self._question_order(len(data.questions), seed))
        qi = int(order[index % len(order)])
        q = data.questions[qi]

        rng, nrng = self.rngs(length, index, seed)
        n_docs = len(data.docs)
        # the documents in the order they are taken: gold, the question's own others, then all the rest
        first = list(q.gold) + [q.more[i] for i in nrng.permutation(len(q.more))]
        mask = np.ones(n_docs, dtype=bool)
        mask[first] = False
        rest = np.flatnonzero(mask)
        seq = np.concatenate([np.asarray(first, dtype=np.int64), rest[nrng.permutation(len(rest))]])
        seq_total = int(doc_costs[seq].sum())
        gold_n = len(q.gold)
        layout_seed = rng.getrandbits(64)  # document order is redrawn from this for every candidate size

        budget = length - a.tokens_to_generate
        # documents alone past the budget bound the count; headers are extra
        full, left = divmod(budget, max(seq_total, 1))
        max_units = max(gold_n, int(full * n_docs + np.searchsorted(np.cumsum(doc_costs[seq]), left, side="right")) + 1)
        max_units += min(n_docs, 4096)  # candidates for the first fit below
        hcum = sequence_cum(ctx, ("qa-headers",), lambda i: "\n\n" + DOCUMENT.format(i=i + 1, document=""), max_units)
        take = seq[np.arange(max_units) % n_docs]  # documents in the order they are taken (repeating the set if needed)
        head, tail = a.template.split("{context}")
        head, tail = head.format(query=q.question), tail.format(query=q.question)

        def build(n: int):
            chosen = take[:n]  # `take` as reordered by the first fit below (the gold documents stay first either way)
            placed, gold_pos = self._arrange(chosen, gold_n, doc_costs, hcum, layout_seed)
            context = "\n\n".join(DOCUMENT.format(i=i, document=data.docs[j]) for i, j in enumerate(placed, 1))
            cost = doc_costs[placed] + np.diff(hcum[:n + 1])
            cum = np.concatenate([[0], np.cumsum(cost)])
            realised = [100 * float(cum[p]) / float(cum[-1]) for p in gold_pos]
            return ctx.renderer.render(head + context + tail, a.answer_prefix), realised

        # Documents are coarse units: when the next one does not fit, take the next ones that do (first
        # fit), so the prompt is filled to within a short document. The room is measured on this sample's
        # short prompt; the fit below re-checks everything with a full tokenization.
        fixed = ctx.count_short(build(gold_n)[0]) - float(doc_costs[take[:gold_n]].sum() + hcum[gold_n])
        take = self._first_fit(take, doc_costs, np.diff(hcum[:max_units + 1]), budget - fixed, gold_n)
        tcum = np.concatenate([[0], np.cumsum(doc_costs[take])])

        def estimate(n: int) -> float:
            return float(tcum[n] + hcum[n])

        fitted = fit_units(budget=budget, build=build, estimate=estimate, count=ctx.count, count_short=ctx.count_short,
                           state=self.fit_state(ctx, length), max_units=max_units, min_units=gold_n, what=self.name)
        return self.make_sample(length=length, index=index, text=fitted.text, tokens=fitted.tokens, answers=q.answers,
                                depths=fitted.extra, meta={"haystack_units": fitted.n, "question": qi})

    def boundary_probes(self, ctx: GenContext):
        """Sequences of every boundary in this task's prompts (core.additivity), from fixed probe draws: the template
        (whose text before {context} ends with a blank line) | "\\n\\nDocument 1:\\n" | document | ... | the tail."""
        a = self.args
        head, tail = a.template.split("{context}")
        if not head.endswith("\n\n"):
            return refused("the template's text before {context} does not end with a blank line")
        path = self._path(ctx)
        data: QaData = ctx.cached(("qa-data", a.dataset, str(path)), lambda: (read_squad if a.dataset == "squad" else read_hotpotqa)(path))
        nrng = np.random.default_rng(0)
        seqs = []
        for j in range(32):
            q = data.questions[int(nrng.integers(len(data.questions)))]
            edges = rendered_edges(ctx, head.format(query=q.question), tail.format(query=q.question), a.answer_prefix)
            if edges is None:
                return refused("the template does not render the task text verbatim")
            first = 1 if j < 16 else int(nrng.integers(2, 3000))
            docs = [data.docs[int(i)] for i in nrng.integers(0, len(data.docs), 8)]
            sep = "\n\n" + DOCUMENT.format(i=1, document="")  # documents are costed between two headers (_doc_costs)
            pieces = [x for k, d in enumerate(docs) for x in ("\n\n" + DOCUMENT.format(i=first + k, document=""), [sep, d, sep])]
            seqs.append(([edges[0][:-2]] if first == 1 else []) + pieces + [edges[1]])
        return {"documents, template edges": seqs}

    @staticmethod
    def _first_fit(take: np.ndarray, doc_costs: np.ndarray, header: np.ndarray, room: float, keep: int, window: int = 4096) -> np.ndarray:
        """take reordered so that its longest fitting prefix is followed by later documents that still fit (the first keep stay first)."""
        cost = doc_costs[take] + header
        n = int(np.searchsorted(np.cumsum(cost), room, side="right"))  # documents that fit in order
        if n >= len(take) or n < keep:
            return take
        take = take.copy()
        slack = room - float(cost[:n].sum())
        while n < len(take) - 1:
            later = take[n + 1:n + 1 + window]
            fits = np.flatnonzero(doc_costs[later] + header[n] <= slack)
            if not len(fits):
                break
            k = n + 1 + int(fits[0])
            take[n], take[k] = take[k], take[n]
            slack -= float(doc_costs[take[n]] + header[n])
            n += 1
        return take

    def _arrange(self, chosen: np.ndarray, gold_n: int, doc_costs: np.ndarray, hcum: np.ndarray, seed: int):
        """The chosen documents in prompt order, and the position of each gold document."""
        n = len(chosen)
        r = np.random.default_rng(seed)
        if self.args.depths is None:
            perm = r.permutation(n)  # perm[new position] = old position
            where = np.empty(n, dtype=np.int64)
            where[perm] = np.arange(n)
            return chosen[perm], [int(where[j]) for j in range(gold_n)]
        others = chosen[gold_n:][r.permutation(n - gold_n)]
        cost = doc_costs[others] + np.diff(hcum[:len(others) + 1])
        cum = np.concatenate([[0], np.cumsum(cost)])
        depths = [self.args.depths[j % len(self.args.depths)] for j in range(gold_n)]
        # gold document j goes before the distractor boundary nearest its depth; equal spots keep gold order
        spots = [int(np.abs(cum - d / 100 * cum[-1]).argmin()) for d in depths]
        ranked = sorted(range(gold_n), key=lambda j: (spots[j], j))
        out, pos, last = [], [0] * gold_n, 0
        for j in ranked:
            out.extend(others[last:spots[j]])
            last = spots[j]
            pos[j] = len(out)
            out.append(chosen[j])
        out.extend(others[last:])
        return np.asarray(out, dtype=np.int64), pos

    @staticmethod
    def _question_order(n: int, seed: int) -> np.ndarray:
        order = list(range(n))
        random.Random(sample_seed("qa-questions", seed)).shuffle(order)
        return np.asarray(order)

    def _path(self, ctx: GenContext) -> Path:
        a = self.args
        if a.data_file:
            p = Path(a.data_file).expanduser()
            if not p.is_file():
                raise ConfigError(f"data_file: {a.data_file} does not exist")
            return p
        if ctx.data_dir is not None:
            if a.dataset == "squad" and (ctx.data_dir / "squad" / "dev-v2.0.json").is_file():
                return ctx.data_dir / "squad" / "dev-v2.0.json"
            if a.dataset == "hotpotqa":
                found = sorted((ctx.data_dir / "hotpotqa").glob("*.json"))
                if found:
                    return found[0]
        from ctxbench.harness.core.models import cache_dir

        url, name = URLS[a.dataset]
        target = cache_dir("data") / name
        return target if target.is_file() else download_once(url, target)

    @staticmethod
    def _doc_costs(ctx: GenContext, data: QaData, path: Path) -> np.ndarray:
        """Tokens each document adds in place (between two document headers); cached per tokenizer, on disk too."""

        def make() -> np.ndarray:
            from ctxbench.harness.core.models import cache_dir, tokenizer_fingerprint

            fp = ctx.cached(("fingerprint",), lambda: tokenizer_fingerprint(ctx.tokenizer))
            h = hashlib.sha256(fp.encode())
            for d in data.docs:
                h.update(d.encode() + b"\0")
            cache = cache_dir("haystacks") / f"docs-{h.hexdigest()[:16]}.npy"
            # measured between two headers, so that whatever a document's edges do to tokenization is counted
            sep = "\n\n" + DOCUMENT.format(i=1, document="")
            return cached_npy(cache, lambda: ctx.piece_counts([sep + d + sep for d in data.docs]) - 2 * int(ctx.piece_counts([sep])[0]),
                              check=lambda a: a.shape == (len(data.docs),))

        return ctx.cached(("qa-doc-costs", str(path), len(data.docs)), make)
