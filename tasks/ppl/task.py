"""Long-context perplexity (`ppl/full`, `ppl/sliding`): the token-level loss of long documents at the suite's lengths.

SPLICE's main results are perplexities of long held-out documents, LOGO's Fig. 4 is PG-19 perplexity against
length and Quest reports validation loss; these tasks give every model the same held-out measurement.

Protocols (one sample = one document at one length; the length is the window the model sees):
- full (SPLICE App. F): a document's first tokens fill one window of `length` tokens, [prefix] + doc, and every
  document token in it is scored in one forward pass. Documents shorter than `min_tokens` are skipped, so every
  length scores the same documents (SPLICE skips documents shorter than the context and cuts longer ones).
- sliding (Press et al. 2021, as LOGO evaluates PG-19): windows of `length` tokens start every `stride` tokens over
  the first `span` tokens of a document; each window scores only the tokens no earlier window scored, so every
  token is scored once, with at least length - stride tokens of context after the first window.
The prefix token (`prefix: auto`) is the tokenizer's BOS, else its EOS, as lm-eval's rolling log-likelihood does: it
conditions the first document token. A row stores the document's summed negative log-likelihood, its scored
token count, and the same per position bucket (a token's position = the context it had in its window): powers of
two (SPLICE Fig. 5, after Anthropic 2023) or the given edges. Perplexity at a length = exp(sum nll / sum tokens).

Sources: `jsonl` (records {text, id}: a study's held-out split, any local corpus), `essays` (pg_essays under
--data-dir), `code` (a directory of source files; default this Python's standard library, since ../shared/data holds
no code corpus), and for users online `pg19` (PG-19 test), `arxiv` (proof-pile-2 arXiv test) and `github`
(codeparrot's clean validation set), streamed from the hub; `path` points any of them at a local copy instead.
"""

from __future__ import annotations

import hashlib
import json
import math
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import LogprobRequest, Sample, TokenLogprobs
from ctxbench.tasks.base import Task, TaskArgs

# (hub dataset, config, split, text field) of the online sources
HUB = {
    "pg19": ("emozilla/pg19", None, "test", "text"),
    "arxiv": ("EleutherAI/proof-pile-2", "arxiv", "test", "text"),
    "github": ("codeparrot/codeparrot-clean-valid", None, "train", "content"),
}
CODE_SKIP = {"site-packages", "dist-packages", "test", "tests", "__pycache__", "idlelib", "turtledemo"}


class PplArgs(TaskArgs):
    source: Literal["jsonl", "essays", "code", "pg19", "arxiv", "github"] = Field(
        "jsonl", description="documents: jsonl records, the essays, a code directory, or a hub corpus (see the module)")
    path: str | None = Field(None, description="jsonl: the file (or a directory of .jsonl); essays/code: a directory; "
                             "pg19/arxiv/github: a local .jsonl/.parquet copy instead of the hub")
    text_field: str = Field("text", description="records: the field holding the document text")
    id_field: str = Field("id", description="records: the field holding the document id (default file:line)")
    min_tokens: int = Field(4096, ge=2, description="skip documents shorter than this (set it to at least the longest "
                            "length, and length + stride for sliding windows)")
    documents: int | None = Field(None, ge=1, description="use at most this many documents (default: all; 64 from the hub)")
    order_seed: int = Field(0, description="local sources are taken in an order shuffled by this seed (by document id)")
    prefix: Literal["auto", "none"] = Field("auto", description="auto: condition the first token on BOS (else EOS)")
    buckets: Literal["log2"] | list[int] = Field("log2", description="position buckets of the loss curve: log2 "
                                                 "(1, 2, 4, ...) or ascending edges")

    @model_validator(mode="after")
    def _edges(self):
        if isinstance(self.buckets, list) and (len(self.buckets) < 2 or self.buckets != sorted(set(self.buckets))
                                               or self.buckets[0] < 1):
            raise ValueError("buckets: give ascending edges >= 1, e.g. [1, 128, 256, 512]")
        return self


class SlidingArgs(PplArgs):
    stride: int | None = Field(None, ge=1, description="tokens between window starts (default: half the length)")
    span: int | None = Field(None, ge=2, description="tokens of each document evaluated (default: min_tokens)")


class Perplexity(Task):
    """One document per sample; scored through a backend's token log-probabilities, not generation."""

    Args = PplArgs
    category = "perplexity"
    metric = "perplexity"
    needs: ClassVar[str] = "prompt_logprobs"
    requires_data = True  # documents come from a corpus (a path, the essays, or the hub), never generated
    mode: ClassVar[str] = "full"
    summary = "token-level loss of long documents ({source}), one window per document"
    data_source = "{source} documents (path: {path})"

    @property
    def max_new_tokens(self) -> int:
        return 0

    # ---- documents
    def documents(self, ctx: GenContext) -> list[tuple[str, list[int]]]:
        """(document id, its first min_tokens.. tokens) of every eligible document, in a fixed order."""
        key = ("ppl-docs", self.name, json.dumps(self.args_json(), sort_keys=True))
        return ctx.cached(key, lambda: self._eligible(ctx))

    def _eligible(self, ctx: GenContext) -> list[tuple[str, list[int]]]:
        a = self.args
        cap = a.documents or (64 if a.source in HUB and not a.path else None)
        keep = max(a.min_tokens, getattr(a, "span", None) or 0)
        out = []
        for doc_id, text in _ordered(read_documents(a, ctx.data_dir), a.order_seed, shuffle=a.source not in HUB):
            ids = ctx.tokenizer(text, add_special_tokens=False)["input_ids"]
            if len(ids) >= a.min_tokens:
                out.append((doc_id, ids[:keep]))
                if cap and len(out) >= cap:
                    break
        if not out:
            raise ConfigError(f"{self.name}: no document of {a.source} has min_tokens={a.min_tokens} tokens; lower "
                              "min_tokens or use longer documents")
        return out

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return len(self.documents(ctx)) if ctx is not None else None

    def prefix_ids(self, tokenizer) -> list[int]:
        if self.args.prefix == "none":
            return []
        tok = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        return [] if tok is None else [int(tok)]

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        docs = self.documents(ctx)
        if not 0 <= index < len(docs):
            raise ConfigError(f"{self.name}: sample index {index} is out of range; {len(docs)} documents qualify")
        doc_id, ids = docs[index]
        prefix = self.prefix_ids(ctx.tokenizer)
        tokens = prefix + self.document_tokens(ids, length, len(prefix))
        return Sample(task=self.name, length=length, index=index, prompt=ctx.tokenizer.decode(tokens), answers=(),
                      prompt_tokens=min(len(tokens), length), max_new_tokens=0, metric=self.metric,
                      meta={"doc_id": doc_id, "token_ids": tokens, "mode": self.mode, **self.window_meta(length)})

    def document_tokens(self, ids: list[int], length: int, prefix: int) -> list[int]:
        """The document tokens of one sample: those that fill the window after the prefix."""
        if self.args.min_tokens < length:
            raise ConfigError(f"{self.name}: length {length} > min_tokens {self.args.min_tokens}: documents would be "
                              "shorter than the window; raise min_tokens to the longest length")
        return ids[: length - prefix]

    def window_meta(self, length: int) -> dict:
        return {}

    # ---- scoring
    def logprob_requests(self, sample: Sample) -> list[LogprobRequest]:
        """The windows of a sample: one for the full protocol."""
        return [LogprobRequest(f"{sample.id}/w0", tuple(sample.meta["token_ids"]), 1)]

    def score_logprobs(self, sample: Sample, results: list[TokenLogprobs]) -> dict:
        """nll (sum), tokens, per-bucket [nll sum, tokens] by position, from the windows' log-probabilities."""
        edges = self.bucket_edges(sample.length)
        sums, counts = [0.0] * (len(edges) - 1), [0] * (len(edges) - 1)
        for req, res in zip(self.logprob_requests(sample), results):
            for pos, lp in zip(range(req.score_from, len(req.token_ids)), res.logprobs):
                k = _bucket(edges, pos)
                sums[k] -= lp
                counts[k] += 1
        nll, n = sum(sums), sum(counts)
        return {"nll": nll, "tokens": n, "loss": nll / n if n else math.nan,
                "buckets": [[edges[k], edges[k + 1], s, c] for k, (s, c) in enumerate(zip(sums, counts)) if c]}

    def bucket_edges(self, length: int) -> list[int]:
        if isinstance(self.args.buckets, list):
            return list(self.args.buckets) if self.args.buckets[-1] >= length else [*self.args.buckets, length]
        top = max(1, math.ceil(math.log2(max(length, 2))))
        return [2 ** k for k in range(top + 1)]


class SlidingPerplexity(Perplexity):
    Args = SlidingArgs
    mode: ClassVar[str] = "sliding"
    summary = "token-level loss of long documents ({source}) in sliding windows (stride {stride}; None: half the length)"

    def stride(self, length: int) -> int:
        s = self.args.stride or max(1, length // 2)
        if s > length:
            raise ConfigError(f"{self.name}: stride {s} > length {length}; tokens would go unscored")
        return s

    def document_tokens(self, ids: list[int], length: int, prefix: int) -> list[int]:
        span = self.args.span or self.args.min_tokens
        if span < length:
            raise ConfigError(f"{self.name}: span {span} < length {length}: no room to slide; raise span or min_tokens")
        return ids[:span]

    def window_meta(self, length: int) -> dict:
        return {"stride": self.stride(length)}

    def logprob_requests(self, sample: Sample) -> list[LogprobRequest]:
        """Press et al.'s windows: start every stride tokens; score the tokens after the previous window's end."""
        ids, length, stride = sample.meta["token_ids"], sample.length, sample.meta["stride"]
        out, prev_end, begin = [], 0, 0
        while prev_end < len(ids):
            end = min(begin + length, len(ids))
            window = ids[begin:end]
            out.append(LogprobRequest(f"{sample.id}/w{len(out)}", tuple(window), max(1, len(window) - (end - prev_end))))
            prev_end, begin = end, begin + stride
        return out


def _bucket(edges: list[int], pos: int) -> int:
    """The bucket [edges[k], edges[k+1]) holding pos (the last bucket also holds its upper edge)."""
    lo, hi = 0, len(edges) - 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if edges[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


# ---- document sources

def _ordered(docs: Iterator[tuple[str, str]], seed: int, *, shuffle: bool) -> Iterator[tuple[str, str]]:
    """Local sources in an order fixed by (seed, document id), so the first N documents are a spread-out sample."""
    if not shuffle:
        yield from docs
        return
    rank = {}
    texts = {}
    for doc_id, text in docs:
        rank[doc_id] = hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()
        texts[doc_id] = text
    for doc_id in sorted(rank, key=rank.get):
        yield doc_id, texts[doc_id]


def read_documents(a: PplArgs, data_dir: Path | None) -> Iterator[tuple[str, str]]:
    """(document id, text) of the source, streamed."""
    if a.source == "essays":
        from ctxbench.tasks.haystacks import essays_path

        root = essays_path(a.path, data_dir)
        files = sorted(root.glob("*.txt")) if root.is_dir() else [root]
        for f in files:
            yield f.name, f.read_text(encoding="utf-8", errors="replace")
    elif a.source == "code":
        root = Path(a.path).expanduser() if a.path else Path(sysconfig.get_paths()["stdlib"])
        if not root.is_dir():
            raise ConfigError(f"path: {a.path} is not a directory of source files")
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root)
            if not CODE_SKIP & set(rel.parts[:-1]) and f.stat().st_size <= 2_000_000:
                yield rel.as_posix(), f.read_text(encoding="utf-8", errors="replace")
    elif a.source == "jsonl" or a.path:
        if not a.path:
            raise ConfigError("path: the jsonl source needs path (a .jsonl file or a directory of them)")
        yield from _records(Path(a.path).expanduser(), a.text_field, a.id_field)
    else:
        yield from _hub(a)


def _records(path: Path, text_field: str, id_field: str) -> Iterator[tuple[str, str]]:
    if not path.exists():
        raise ConfigError(f"path: {path} does not exist")
    files = sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".parquet")) if path.is_dir() else [path]
    for f in files:
        if f.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = enumerate(pq.read_table(f).to_pylist())
        else:
            from ctxbench.tasks.realdata import read_records

            rows = enumerate(read_records(f))
        for i, rec in rows:
            if text_field not in rec:
                raise ConfigError(f"text_field: {text_field!r} missing in {f.name}:{i + 1}; keys are {sorted(rec)}")
            yield str(rec.get(id_field) or f"{f.name}:{i + 1}"), str(rec[text_field] or "")


def _hub(a: PplArgs) -> Iterator[tuple[str, str]]:
    """A hub corpus, streamed (PG-19 books are long: nothing is downloaded beyond what is read)."""
    from ctxbench.tasks.realdata import check_online

    repo, name, split, field = HUB[a.source]
    hint = f"or pass path= a local .jsonl/.parquet copy with a {field!r} field"
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"source {a.source}: reading the hub needs `pip install datasets`; {hint}") from None
    check_online(f"source {a.source}", hint)
    ds = datasets.load_dataset(repo, name, split=split, streaming=True)
    for i, rec in enumerate(ds):
        yield str(rec.get(a.id_field) or f"{a.source}:{i}"), str(rec.get(field) or "")


@register("task", "ppl/full", args=PplArgs)
def ppl_full(**args):
    return Perplexity("ppl/full", PplArgs(**args))


@register("task", "ppl/sliding", args=SlidingArgs)
def ppl_sliding(**args):
    return SlidingPerplexity("ppl/sliding", SlidingArgs(**args))
