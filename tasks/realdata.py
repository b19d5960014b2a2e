"""What the real-data benchmarks share: reading the official files, and middle truncation that fits.

Data comes from a local file in the benchmark's official format (`data_file`, or a conventional
place under data_dir), else from the official hub dataset. Heavy libraries (datasets,
huggingface_hub) are imported only when the hub is used.

Truncation: the official LongBench and InfiniteBench code cuts the middle of the task text BEFORE
the chat template is applied, so the final prompt can exceed the limit (and the generation is
not reserved at all). We cut only the context, and measure the final rendered prompt (chat
template and answer prefix included), so prompt_tokens + max_new_tokens <= the sample's length,
always. The instruction and the question are never cut.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError, OfflineError
from ctxbench.harness.core.prompting import PromptRenderer, Rendered
from ctxbench.tasks.base import Task, TaskArgs

_SLOT = "\x00CONTEXT\x00"  # stands for the context while a template is formatted, so values are never re-parsed


class RealArgs(TaskArgs):
    """Arguments every real-data task takes."""

    data_file: str | None = Field(None, description="local file in the benchmark's official format (.jsonl, or .json for "
                                                     "LongBench v2); default: a file under data_dir, else the hub")
    limit: int | None = Field(None, ge=1, description="use only the first N examples, in the official order (e.g. 150 as in the HQA paper)")
    max_new_tokens: int | None = Field(None, ge=1, description="tokens reserved for the answer; default: the official value for the task")


def split_template(template: str, **fields: Any) -> tuple[str, str]:
    """(head, tail) of a str.format template around its {context} field, the other fields filled."""
    text = template.format(context=_SLOT, **fields)
    if text.count(_SLOT) != 1:
        raise ConfigError("template: needs exactly one {context} field")
    head, tail = text.split(_SLOT)
    return head, tail


# ---------------------------------------------------------------- loading


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a .jsonl file (one JSON object a line) or a .json file (a list, or {"data": [...]}).

    Lines end at "\n" only, as JSON Lines defines them (not str.splitlines(), which also breaks at U+2028, U+0085
    and other characters a JSON string may hold raw); a "\r" before it is JSON whitespace.

    Plain json keeps the official value types (InfiniteBench math_find labels are ints or floats).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"data_file: cannot read {path} ({e.strerror or e})") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"data_file: {path} is not valid JSON (line {e.lineno}: {e.msg})") from None
        data = data.get("data", data) if isinstance(data, dict) else data
        if not isinstance(data, list):
            raise ConfigError(f"data_file: {path} must hold a JSON list of records")
        return data
    rows = []
    for number, line in enumerate(text.split("\n"), 1):  # JSON Lines ends a line at "\n" only: U+2028 is data
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ConfigError(f"data_file: {path}:{number} is not a JSON object ({e.msg}); "
                              "fix that line or give the official file") from None
        if not isinstance(rows[-1], dict):
            raise ConfigError(f"data_file: {path}:{number} is not a JSON object; give the official file")
    return rows


def local_file(data_file: str | None, data_dir: Path | None, candidates: Sequence[str]) -> Path | None:
    """The explicit data_file, else the first candidate (relative to data_dir) that exists, else None."""
    if data_file:
        p = Path(data_file).expanduser()
        if not p.exists():
            raise ConfigError(f"data_file: {data_file} does not exist; give a file in the official format")
        return p
    data_dir = data_dir or (Path(os.environ["CTXBENCH_DATA_DIR"]) if os.environ.get("CTXBENCH_DATA_DIR") else None)
    if data_dir is not None:
        for c in candidates:
            if (data_dir / c).exists():
                return data_dir / c
    return None


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub answers at all: offline, the HF clients retry with backoff for half a minute a call."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return True  # the user chose offline mode: let the clients use their local cache
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=timeout).close()
        return True
    except OSError:
        return False


def check_online(what: str, hint: str) -> None:
    """Refuse in one line, before a download is tried, when the hub cannot be reached."""
    if not hub_reachable():
        raise OfflineError(f"{what}: the Hugging Face hub is unreachable; {hint} (or set HF_HUB_OFFLINE=1 to use a copy in the HF cache)")


def hub_dataset(repo: str, *, name: str | None = None, split: str, what: str, hint: str) -> list[dict[str, Any]]:
    """Rows of an official hub dataset via `datasets.load_dataset` (as the official code loads it)."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"{what}: loading from the hub needs `pip install datasets`; or {hint}") from None
    check_online(what, hint)
    try:
        ds = datasets.load_dataset(repo, name, split=split) if name else datasets.load_dataset(repo, split=split)
    except Exception as e:  # noqa: BLE001 - offline, missing config, script datasets: all end the same way for the user
        where = f"{repo}/{name}" if name else repo
        raise OfflineError(f"{what}: cannot load {where} from the hub ({e.__class__.__name__}); {hint}") from None
    return [dict(row) for row in ds]


def hub_file(repo: str, filename: str, *, what: str, hint: str, revision: str | None = None) -> Path:
    """One file of an official hub dataset repository (at a pinned `revision` where given), downloaded once into the
    HF cache."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError(f"{what}: downloading needs `pip install huggingface_hub`; or {hint}") from None
    check_online(what, hint)
    try:
        return Path(hf_hub_download(repo, filename, repo_type="dataset", revision=revision))
    except Exception as e:  # noqa: BLE001
        raise OfflineError(f"{what}: cannot download {filename} from {repo} ({e.__class__.__name__}); {hint}") from None


class RealDataTask(Task):
    """A task over the examples of an official dataset: sample index i is example i."""

    Args = RealArgs
    requires_data = True  # cannot generate without its dataset (local file or hub)
    reads_records = True  # sample index i is record i: `--samples N` keeps the first N records
    official_max_new_tokens: int = 32

    def __init__(self, name: str, args: RealArgs):
        super().__init__(name, args)
        self._records: list[dict[str, Any]] | None = None

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens or self.official_max_new_tokens

    def local_candidates(self) -> list[str]:
        """Where the official file sits under data_dir (relative paths, first found wins)."""
        return []

    def local_path(self, data_dir: Path | None) -> Path | None:
        return local_file(self.args.data_file, data_dir, self.local_candidates())

    def data_files(self, ctx: GenContext) -> list[Path]:
        path = self.local_path(ctx.data_dir)
        return [path] if path is not None and path.is_file() else []

    def load(self, data_dir: Path | None) -> list[dict[str, Any]]:
        """All examples, official order. Subclasses read the local file (local_path) or the hub."""
        raise NotImplementedError

    def records(self, ctx: GenContext | None = None) -> list[dict[str, Any]]:
        if self._records is None:
            rows = self.load(ctx.data_dir if ctx is not None else None)
            if not rows:
                where = self.local_path(ctx.data_dir if ctx is not None else None) or "the hub dataset"
                raise ConfigError(f"{self.name}: {where} holds no examples; give the benchmark's official file")
            self._records = rows[: self.args.limit] if self.args.limit else rows
        return self._records

    def samples_per_length(self, ctx: GenContext | None = None) -> int:
        return len(self.records(ctx))

    def record(self, index: int, ctx: GenContext) -> dict[str, Any]:
        rows = self.records(ctx)
        if not 0 <= index < len(rows):
            raise ConfigError(f"{self.name}: sample index {index} is out of range; the data has {len(rows)} examples")
        return rows[index]

    def document_cluster(self, document: str) -> str:
        """The sample's cluster id: questions on one document are not independent (docs/statistics.md). Built from
        the document's own text, so every model scored on it gets the same id."""
        return f"{self.name}:{hashlib.sha1(document.encode('utf-8')).hexdigest()[:16]}"


# ---------------------------------------------------------------- truncation


@dataclass(frozen=True)
class Fit:
    rendered: Rendered
    tokens: int  # of the final rendered prompt
    truncated_tokens: int  # context tokens removed from the middle (0 = the whole context fits)
    context_tokens: int  # context tokens before truncation


def context_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def middle_cut(tokenizer, ids: Sequence[int], keep: int) -> str:
    """The text of the first keep//2 and the last keep - keep//2 tokens, decoded as the official code does."""
    if keep <= 0:
        return ""
    head = keep // 2
    left = tokenizer.decode(list(ids[:head]), skip_special_tokens=True)
    right = tokenizer.decode(list(ids[len(ids) - (keep - head):]), skip_special_tokens=True)
    return left + right


def head_cut(tokenizer, ids: Sequence[int], keep: int) -> str:
    """The text of the first `keep` tokens: HELMET cuts the end of its context, not the middle."""
    return tokenizer.decode(list(ids[:keep]), skip_special_tokens=True) if keep > 0 else ""


def fit_context(ctx: GenContext, render: Callable[[str], Rendered], context: str, *, length: int, max_new_tokens: int,
                what: str, cut: Callable = middle_cut) -> Fit:
    """Render with as much of the context as fits, cutting its middle (or as `cut` does), so prompt + generation <= length.

    Measures the prompt without context (a short tokenization), tokenizes the context once, cuts
    its ids to the room left, decodes and re-renders, and verifies the count of the final prompt;
    decode/re-encode drift at the joins is shaved off in at most a few more rounds.
    """
    budget = length - max_new_tokens
    fixed = ctx.count_short(render(""))
    room = budget - fixed
    if room <= 0:
        raise ConfigError(f"length: {length} tokens cannot hold {what}: its instruction and question take {fixed} tokens "
                          f"and the answer {max_new_tokens}; use a larger length")
    ids = context_ids(ctx.tokenizer, context)
    n = len(ids)
    if n <= room:
        rendered = render(context)
        tokens = ctx.count(rendered)
        if tokens <= budget:
            return Fit(rendered, tokens, 0, n)
        keep = n - (tokens - budget)
    else:
        keep = room
    for attempt in range(6):
        rendered = render(cut(ctx.tokenizer, ids, keep))
        tokens = ctx.count(rendered)
        if tokens <= budget:
            return Fit(rendered, tokens, n - keep, n)
        keep -= (tokens - budget) + attempt  # drift at the two joins; widen the margin if it persists
    raise ConfigError(f"length: could not fit {what} into {length} tokens (tokenizer round trip keeps growing); use a larger length")


def renderer_for(ctx: GenContext, plain: bool) -> PromptRenderer:
    """The suite's renderer, or the plain (no chat template) one that some official protocols require."""
    if not plain or ctx.renderer.template == "plain":
        return ctx.renderer
    return ctx.cached(("plain-renderer",), lambda: PromptRenderer(ctx.tokenizer, "plain"))


def first_line(prediction: str) -> str:
    """The LongBench cut for few-shot tasks: the first line after leading newlines."""
    return prediction.lstrip("\n").split("\n")[0]

