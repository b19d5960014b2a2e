"""HELMET's judge-free categories (Yen et al. 2025, princeton-nlp/HELMET): retrieval-augmented QA (`helmet/rag_nq`,
`helmet/rag_triviaqa`, `helmet/rag_hotpotqa`, `helmet/rag_popqa`) and passage re-ranking (`helmet/rerank_msmarco`).
In-context learning is in tasks/helmet/icl.py.

HELMET's own files (data.tar.gz of the princeton-nlp/HELMET hub dataset, data/kilt and data/msmarco) hold, per
length, a question with k retrieved passages: RAG k = 50/105/220/440/1000 and re-rank k = 50/130/285/600/1000 at
8K/16K/32K/64K/128K. A sample of length L reads the file of the largest HELMET length at most L (or `k`).
As HELMET: 100 test items drawn with random.seed(42) from the sorted question keys (file order kept), 2
demonstrations per item drawn by a per-question seed, no chat template, 20 (re-rank: 200) new tokens, the end
of the passages cut when the prompt is too long.
Scores, as HELMET's eval.py runs them (tasks/helmet/metrics.py): the prompt's answer cue put before the output, no
newline cut (HELMET's configs ask for one under a key its parser never reads; `stop_newline: true` gives it), in
thinking mode the text after the last </think>. RAG substring exact match; re-rank NDCG@10 of the parsed ranking.

Licences: HELMET's code MIT; KILT MIT, Natural Questions CC BY-SA 3.0, TriviaQA Apache-2.0, HotpotQA CC BY-SA 4.0,
PopQA MIT; MS MARCO is for non-commercial research only (Microsoft's terms). Nothing is shipped: the files are
read from --data-dir or downloaded at run time.
"""

from __future__ import annotations

import hashlib
import math
import random
import tarfile
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.reasoning import Split
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.helmet.metrics import helmet_output, rerank_ndcg, substring_em, thinking_split
from ctxbench.tasks.realdata import fit_context, head_cut, hub_file, read_records, renderer_for

HUB = "princeton-nlp/HELMET"
RAG_FILES = {  # dataset -> (test file with {k}, demonstration file), under data/kilt/
    "nq": ("nq-dev-multikilt_1000_k{k}_dep6.jsonl", "nq-train-multikilt_1000_k3_dep6.jsonl"),
    "triviaqa": ("triviaqa-dev-multikilt_1000_k{k}_dep6.jsonl", "triviaqa-train-multikilt_1000_k3_dep6.jsonl"),
    "hotpotqa": ("hotpotqa-dev-multikilt_1000_k{k}_dep3.jsonl", "hotpotqa-train-multikilt_1000_k3_dep3.jsonl"),
    "popqa": ("popqa_test_1000_k{k}_dep6.jsonl", "popqa_test_1000_k3_dep6.jsonl"),
}
RAG_K = {8192: 50, 16384: 105, 32768: 220, 65536: 440, 131072: 1000}  # configs/rag*.yaml
RERANK_K = {8192: 50, 16384: 130, 32768: 285, 65536: 600, 131072: 1000}  # configs/rerank*.yaml
POPQA_THRESHOLD = 3.0  # kilt_popqa_3: only questions with log10(subject popularity) < 3
RAG_PROMPT = ("Use the given documents to write a concise and short answer to the question. Write your answer in the "
              "following format:\nAnswer: [answer]\n\n")
RERANK_PROMPT = ("You are provided with a list of documents, each indicated by their ID. Rank each document based on their "
                 "relevance to the question in descending order from most relelvant to least relevant texts. Include all "
                 "documents in the rankings. Write your answer using the unique IDs, with the following format:\n"
                 "Ranking: ID3 > ID1 > ID2\n\n")  # "relelvant" is HELMET's spelling


STOP_NEWLINE_HELP = ("score the output's first line only: the stop HELMET's configs ask for (stop_new_line: true) but "
                     "its code never applies, so its published numbers are not cut (false, the default); "
                     "thinking mode never cuts")


class HelmetScoring:
    """Scoring as HELMET's eval.py: the prompt's answer cue (`cue`, HELMET's system_template) goes before the output
    when no chat template was used, the output is cut at a newline only with stop_newline, and in thinking mode
    split_thinking does eval.py's work (the cue, then the text after the last </think>)."""

    cue: ClassVar[str] = "Answer:"
    args: Any

    def helmet_text(self, prediction: str, sample: Sample) -> str:
        """The text HELMET's metric reads for this prediction."""
        if sample.meta.get("thinking"):  # split_thinking has already made it
            return prediction
        return helmet_output(prediction, self.cue, prepend=sample.meta.get("template") != "chat",
                             stop_newline=self.args.stop_newline)

    def split_thinking(self, text: str, sample: Sample, *, api_reasoning: str | None, opened: bool) -> Split:
        cue = self.cue if sample.meta.get("template") != "chat" else ""
        return thinking_split(text, cue=cue, api_reasoning=api_reasoning)


def thinking_meta(ctx: GenContext) -> dict[str, bool]:
    """{"thinking": True} in thinking mode (the sample cache is keyed by the mode), so that scoring knows."""
    return {"thinking": True} if getattr(ctx.renderer, "thinking", "off") == "on" else {}


class HelmetArgs(TaskArgs):
    data_path: str | None = Field(None, description="folder holding HELMET's data/ (kilt/, msmarco/); default: data_dir/helmet/, "
                                                     "else data.tar.gz from the hub (11 GB, once)")
    k: int | None = Field(None, ge=1, description="passages per question (the file's k); default: HELMET's k for the length")
    limit: int = Field(100, ge=1, description="test items drawn (HELMET's max_test_samples)")
    shots: int = Field(2, ge=0, description="demonstrations per prompt")
    seed: int = Field(42, description="HELMET's --seed: draws the test items (not the suite's seed)")
    plain: bool = Field(True, description="no chat template, as HELMET's configs (use_chat_template: false)")
    max_new_tokens: int | None = Field(None, ge=1, description="tokens to generate; default: HELMET's (RAG 20, re-rank 200)")
    stop_newline: bool = Field(False, description=STOP_NEWLINE_HELP)


def local_helmet_file(relative: str, args: HelmetArgs, data_dir: Path | None) -> Path | None:
    """A file of HELMET's data/ folder under data_path, data_dir/helmet or the extracted cache, if it is there."""
    from ctxbench.harness.core.models import cache_dir

    roots = [Path(args.data_path).expanduser()] if args.data_path else []
    roots += [data_dir / "helmet"] if data_dir is not None else []
    for root in [*roots, cache_dir("helmet")]:
        for path in (root / "data" / relative, root / relative):
            if path.is_file():
                return path
    return None


def helmet_file(relative: str, args: HelmetArgs, data_dir: Path | None) -> Path:
    """A file of HELMET's data/ folder: under data_path or data_dir/helmet, else extracted once from the hub tarball."""
    from ctxbench.harness.core.models import cache_dir

    found = local_helmet_file(relative, args, data_dir)
    if found is not None:
        return found
    if args.data_path:
        raise ConfigError(f"data_path: {args.data_path} has no data/{relative}; give HELMET's unpacked data.tar.gz")
    hint = f"put HELMET's data/{relative} under data_dir/helmet/ (from {HUB}'s data.tar.gz)"
    _extract(hub_file(HUB, "data.tar.gz", what=f"HELMET {relative}", hint=hint), cache_dir("helmet"))
    path = cache_dir("helmet") / "data" / relative
    if not path.is_file():
        raise ConfigError(f"HELMET's data.tar.gz has no data/{relative}; {hint}")
    return path


def _extract(tarball: Path, root: Path) -> None:
    """The kilt and msmarco files of HELMET's tarball (one pass over it), written atomically."""
    from ctxbench.harness.core.io import atomic_write

    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar:
            name = member.name.lstrip("./")
            if member.isfile() and name.startswith(("data/kilt/", "data/msmarco/")) and ".." not in name:
                source = tar.extractfile(member)
                if source is not None:
                    atomic_write(root / name, source.read())


def hf_shuffled(n: int, seed: int) -> list[int]:
    """The row order of `datasets.Dataset.shuffle(seed=seed)`: numpy's default_rng(seed).permutation(n)."""
    import numpy as np

    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


def first_per_key(rows: list[dict[str, Any]], order: list[int], key: str, count: int) -> list[dict[str, Any]]:
    """The first `count` rows in `order` with distinct `key` (HELMET: shuffle, drop_duplicates, select(range(count)))."""
    seen, out = set(), []
    for i in order:
        if len(out) == count:
            break
        if rows[i][key] not in seen:
            seen.add(rows[i][key])
            out.append(rows[i])
    return out


def draw_items(rows: list[dict[str, Any]], key: str, limit: int, seed: int) -> list[dict[str, Any]]:
    """HELMET's test draw: random.seed(seed); random.sample(sorted(keys), limit); the rows with those keys, in file order."""
    keys = sorted({r[key] for r in rows})
    chosen = set(random.Random(seed).sample(keys, min(limit, len(keys))))
    return [r for r in rows if r[key] in chosen]


def key_seed(value: Any) -> int:
    return int(hashlib.sha256(str(value).encode("utf-8")).hexdigest(), 16) % 2**31


class HelmetTask(HelmetScoring, Task):
    """A HELMET file-backed category: the file depends on the length (its k), the items on HELMET's draw."""

    Args = HelmetArgs
    requires_data = True
    k_by_length: dict[int, int] = RAG_K
    default_new_tokens = 20

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens or self.default_new_tokens

    def samples_per_length(self, ctx: GenContext | None = None) -> int:
        return self.args.limit

    def k_for(self, length: int) -> int:
        if self.args.k is not None:
            return self.args.k
        fits = [n for n in self.k_by_length if n <= length]
        if not fits:
            raise ConfigError(f"length: HELMET's {self.name} starts at {min(self.k_by_length)} tokens; "
                              f"use a length of at least {min(self.k_by_length)} or set k")
        return self.k_by_length[max(fits)]

    def relative_files(self) -> list[str]:
        """Every file this task may read (the sample cache is keyed by their content)."""
        raise NotImplementedError

    def data_files(self, ctx: GenContext) -> list[Path]:
        found = (local_helmet_file(r, self.args, ctx.data_dir) for r in self.relative_files())
        return [p for p in found if p is not None]

    def rows(self, relative: str, ctx: GenContext) -> list[dict[str, Any]]:
        return ctx.cached(("helmet", relative, self.args.data_path, str(ctx.data_dir)),
                          lambda: read_records(helmet_file(relative, self.args, ctx.data_dir)))

    def item(self, items: list[dict[str, Any]], index: int, what: str) -> dict[str, Any]:
        if not 0 <= index < len(items):
            raise ConfigError(f"{self.name}: sample {index} is out of range; {what} has {len(items)} drawn items")
        return items[index]

    def fit(self, ctx: GenContext, head: str, context: str, tail: str, length: int, what: str):
        renderer = renderer_for(ctx, self.args.plain)
        fit = fit_context(ctx, lambda c: renderer.render(head + c + tail), context, length=length,
                          max_new_tokens=self.max_new_tokens, what=what, cut=head_cut)
        return fit, renderer.template


class HelmetRag(HelmetTask):
    category = "retrieval-augmented QA"
    metric = "helmet/substring_em"
    summary = "HELMET RAG ({name}): a question over k retrieved Wikipedia passages, substring exact match"
    data_source = "princeton-nlp/HELMET data/kilt (hub data.tar.gz), or data_path / data_dir/helmet/"

    def __init__(self, dataset: str, args: HelmetArgs):
        super().__init__(f"helmet/rag_{dataset}", args)
        self.dataset = dataset

    def relative_files(self) -> list[str]:
        test, demo = RAG_FILES[self.dataset]
        ks = [self.args.k] if self.args.k else sorted(set(self.k_by_length.values()))
        return [f"kilt/{test.format(k=k)}" for k in ks] + [f"kilt/{demo}"]

    def _popular_only(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.dataset != "popqa":
            return rows
        return [r for r in rows if math.log10(r["s_pop"]) < POPQA_THRESHOLD]

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        test_name, demo_name = RAG_FILES[self.dataset]
        k = self.k_for(length)
        relative = "kilt/" + test_name.format(k=k)
        rows = self._popular_only(self.rows(relative, ctx))
        key = "id" if rows and "id" in rows[0] else "question"
        items = ctx.cached(("helmet-draw", relative, key, self.args.limit, self.args.seed),
                           lambda: draw_items(rows, key, self.args.limit, self.args.seed))
        rec = self.item(items, index, relative)
        head = RAG_PROMPT + self._demos(rec, key, ctx)
        context = "\n\n".join(_passage(c) for c in rec["ctxs"])
        fit, template = self.fit(ctx, head, context, f"\n\nQuestion: {rec['question']}\nAnswer:", length,
                                 f"{self.name} item {index} (k={k})")
        meta = {"k": k, "id": rec.get(key), "template": template, "truncated_tokens": fit.truncated_tokens,
                "context_tokens": fit.context_tokens, **thinking_meta(ctx)}
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens,
                                answers=[str(a) for a in _flat(rec["answers"])], meta=meta)

    def _demos(self, rec: dict[str, Any], key: str, ctx: GenContext) -> str:
        if self.args.shots == 0:
            return ""
        pool = self._popular_only(self.rows("kilt/" + RAG_FILES[self.dataset][1], ctx))
        if self.dataset == "popqa":  # one split only: never the question itself
            pool = [d for d in pool if d[key] != rec[key]]
        demos = first_per_key(pool, hf_shuffled(len(pool), key_seed(rec[key])), key, self.args.shots)
        text = "\n\n".join("\n\n".join(_passage(c) for c in d["ctxs"]) + f"\n\nQuestion: {d['question']}\nAnswer: {d['answers'][0]}"
                           for d in demos)
        return text + "\n\n"

    def score(self, prediction: str, sample: Sample) -> float:
        return substring_em(self.helmet_text(prediction, sample), sample.answers)


class HelmetRerank(HelmetTask):
    category = "re-ranking"
    metric = "helmet/ndcg@10"
    summary = "HELMET re-rank ({name}): order k MS MARCO passages by relevance, NDCG@10 as trec_eval"
    data_source = "princeton-nlp/HELMET data/msmarco (hub data.tar.gz; MS MARCO: non-commercial), or data_path"
    k_by_length = RERANK_K
    default_new_tokens = 200
    cue = "Ranking:"

    def relative_files(self) -> list[str]:
        ks = [self.args.k] if self.args.k else sorted(set(self.k_by_length.values()))
        return [f"msmarco/test_reranking_data_k{k}_dep3.jsonl" for k in ks] + ["msmarco/test_reranking_data_k10_dep3.jsonl"]

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        k = self.k_for(length)
        relative = f"msmarco/test_reranking_data_k{k}_dep3.jsonl"
        rows = self.rows(relative, ctx)
        key = "qid" if rows and "qid" in rows[0] else "query"
        items = ctx.cached(("helmet-draw", relative, key, self.args.limit, self.args.seed),
                           lambda: draw_items(rows, key, self.args.limit, self.args.seed))
        rec = self.item(items, index, relative)
        titled = "title" in rec["ctxs"][0]
        head = RERANK_PROMPT + self._demos(rec, items, titled, ctx)
        context = "\n\n".join(_ranked_passage(c, titled) for c in rec["ctxs"])
        fit, template = self.fit(ctx, head, context, f"\n\nQuery: {rec['query']}\nRanking:", length,
                                 f"{self.name} item {index} (k={k})")
        qrels = {str(c["id"]): int(c["label"]) for c in rec["ctxs"]}
        meta = {"k": k, "qid": rec.get("qid"), "qrels": qrels, "template": template,
                "truncated_tokens": fit.truncated_tokens, "context_tokens": fit.context_tokens, **thinking_meta(ctx)}
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens,
                                answers=[_gold_ranking(rec["ctxs"])], meta=meta)

    def _demos(self, rec: dict[str, Any], items: list[dict[str, Any]], titled: bool, ctx: GenContext) -> str:
        if self.args.shots == 0:
            return ""
        demos = self.rows("msmarco/test_reranking_data_k10_dep3.jsonl", ctx)
        if len(demos) > 2 * len(items):  # HELMET drops every test query from a large pool, else only this one
            drawn = {i["qid"] for i in items}
            pool = [d for d in demos if d["qid"] not in drawn]
        else:
            pool = [d for d in demos if d["qid"] != rec["qid"]]
        seed = abs(int(hashlib.sha256(str(rec["qid"]).encode("utf-8")).hexdigest(), 16) % 2**31)
        chosen = first_per_key(pool, hf_shuffled(len(pool), seed), "qid", self.args.shots)
        return "".join("\n\n".join(_ranked_passage(c, titled) for c in d["ctxs"])
                       + f"\n\nQuery: {d['query']}\nRanking: {_gold_ranking(d['ctxs'])}\n\n" for d in chosen)

    def score(self, prediction: str, sample: Sample) -> float:
        return rerank_ndcg(self.helmet_text(prediction, sample), sample.meta["qrels"], 10)


def _passage(c: dict[str, Any]) -> str:
    return f"Document (Title: {c['title']}): {c['text']}"


def _ranked_passage(c: dict[str, Any], titled: bool) -> str:
    return f"[ID: {c['id']}] Document (Title: {c['title']}): {c['text']}" if titled else f"[ID: {c['id']}] Document: {c['text']}"


def _gold_ranking(ctxs: list[dict[str, Any]]) -> str:
    return " > ".join(str(c["id"]) for c in sorted(ctxs, key=lambda c: c["label"], reverse=True))


def _flat(answers) -> list[str]:
    """HELMET's answers: a string, a list, or a list of lists (flattened)."""
    if isinstance(answers, str):
        return [answers]
    return [a for group in answers for a in group] if answers and isinstance(answers[0], list) else list(answers)


def _register_rag(dataset: str) -> None:
    def factory(**args):
        return HelmetRag(dataset, HelmetArgs(**args))

    register("task", f"helmet/rag_{dataset}", args=HelmetArgs, version=1)(factory)


for _d in RAG_FILES:
    _register_rag(_d)


@register("task", "helmet/rerank_msmarco", args=HelmetArgs, version=1)
def rerank_msmarco(**args):
    return HelmetRerank("helmet/rerank_msmarco", HelmetArgs(**args))
