"""OpenAI MRCR (`mrcr/2needle`, `mrcr/4needle`, `mrcr/8needle`; `mrcr` with a `needles` argument): multi-round
co-reference resolution in a long multi-turn conversation.

Each official item is a conversation of user requests ("write a poem about tapirs") and the assistant's writings, in
which 2, 4 or 8 identical requests hide; the last user turn asks for the i-th of them, prefixed with a random string.
The conversation is sent as it is, turn by turn (Sample.turns: chat APIs get the messages, local backends the chat
template's rendering), never cut: items are scored whole at the length bin of their real size under the scored
model's tokenizer (tasks/length_bins.py; OpenAI's bins (4096, 8192] ... (524288, 1048576]).

The grader is OpenAI's (the dataset card's `grade`): a response that does not start with the item's random string
scores 0; otherwise the string is removed from the front of both and the score is
difflib.SequenceMatcher(None, response, answer).ratio(), response first (the ratio is not symmetric: difflib's
autojunk looks at the second sequence). Nothing is stripped: a leading space or newline before the string is a 0.

Data: the hub dataset openai/mrcr (MIT), files <n>needle/<n>needle_0.parquet and _1.parquet at the pinned revision
REVISION, downloaded at run time into the HF cache (never shipped); or a local copy laid out the same way (parquet or
.jsonl with the same columns) under data_path or data_dir/mrcr/.
"""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.length_bins import bin_item, items_in_bin
from ctxbench.tasks.parquet_rows import ParquetRows
from ctxbench.tasks.realdata import hub_file, hub_reachable, read_records

HUB = "openai/mrcr"
REVISION = "f4c69fae7cf81f7ca26b9fee34b392a50f6b8a1d"  # the dataset's commit this task reads by default
HUB_FILES = ("{n}needle/{n}needle_0.parquet", "{n}needle/{n}needle_1.parquet")
COLUMNS = ("answer", "random_string_to_prepend", "n_needles", "desired_msg_index", "total_messages", "n_chars")
MAX_NEW_TOKENS = 1024


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """OpenAI's MRCR grader: 0 without the random prefix, else the SequenceMatcher ratio of what follows it."""
    if not response.startswith(random_string_to_prepend):
        return 0.0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())


class MrcrArgs(TaskArgs):
    needles: Literal[2, 4, 8] = Field(2, description="needles per conversation: the official 2needle, 4needle or 8needle file set")
    data_path: str | None = Field(None, description="local copy laid out as the hub repo: <n>needle/*.parquet (or *.jsonl with the "
                                                     "same columns); default: data_dir/mrcr/, else the hub at `revision`")
    revision: str = Field(REVISION, description="commit of the openai/mrcr hub dataset to download")
    limit: int | None = Field(None, ge=1, description="score at most the first N items of each length bin (official order); "
                                                      "default: the suite's samples")
    max_new_tokens: int = Field(MAX_NEW_TOKENS, ge=1, description="tokens the answer may take (counted in an item's size)")


MrcrItems = ParquetRows  # one needle count's official rows (tasks/parquet_rows.py)


def read_items(files: list[Path]) -> MrcrItems:
    """Every row of the files, in order (parquet row groups, then .jsonl lines)."""
    rows: list[dict[str, Any]] = []
    where: list[tuple[Path, int, int]] = []
    for path in files:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            missing = {"prompt", "answer", "random_string_to_prepend"} - set(pf.schema_arrow.names)
            _check(not missing, path, missing)
            cols = [c for c in COLUMNS if c in pf.schema_arrow.names]
            for group in range(pf.num_row_groups):
                part = pf.read_row_group(group, columns=cols).to_pylist()
                rows += part
                where += [(path, group, k) for k in range(len(part))]
        else:
            part = read_records(path)
            _check(all(isinstance(r, dict) and {"prompt", "answer", "random_string_to_prepend"} <= set(r) for r in part),
                   path, {"prompt", "answer", "random_string_to_prepend"})
            rows += part
            where += [(path, 0, k) for k in range(len(part))]
    for i, r in enumerate(rows):
        if r.get("n_chars") is None:  # the official files carry it; a hand-made copy may not
            r["n_chars"] = len(r["prompt"]) if "prompt" in r else 0
    return MrcrItems(rows, where, "n_chars")


def _check(ok: bool, path: Path, columns) -> None:
    if not ok:
        raise ConfigError(f"data_path: {path} is not in MRCR's format: it needs the columns {', '.join(sorted(columns))}; "
                          "give the official files")


class Mrcr(Task):
    Args = MrcrArgs
    category = "coreference"
    metric = "mrcr/ratio"
    summary = ("{name}: reproduce the i-th of {needles} identical requests' answers from a long multi-turn conversation "
               "(OpenAI MRCR), items binned by their real token length")
    data_source = "openai/mrcr (hub, MIT, pinned revision; downloaded at run time), or data_path / data_dir/mrcr/<n>needle/"
    requires_data = True

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return self.args.limit

    def local_files(self, data_dir: Path | None) -> list[Path] | None:
        """The local copy's files of this needle count; None when there is no local copy."""
        if self.args.data_path:
            root = Path(self.args.data_path).expanduser()
            if not root.is_dir():
                raise ConfigError(f"data_path: {self.args.data_path} is not a directory; give a copy laid out as <n>needle/*.parquet")
        elif data_dir is not None and (data_dir / "mrcr").is_dir():
            root = data_dir / "mrcr"
        else:
            return None
        folder = root / f"{self.args.needles}needle"
        found = sorted(folder.glob("*.parquet")) + sorted(folder.glob("*.jsonl"))
        if not found:
            raise ConfigError(f"data_path: {root} has no {self.args.needles}needle/*.parquet (nor *.jsonl); "
                              f"give a copy laid out as the {HUB} hub repo")
        return found

    def data_files(self, ctx: GenContext) -> list[Path]:
        return self.local_files(ctx.data_dir) or []

    def items(self, ctx: GenContext) -> MrcrItems:
        def load() -> MrcrItems:
            files = self.local_files(ctx.data_dir)
            if files is None:
                hint = f"put the files at data_dir/mrcr/{self.args.needles}needle/ (from the {HUB} hub repo) or pass data_path"
                files = [hub_file(HUB, f, what=self.name, hint=hint, revision=self.args.revision) for f in self.hub_names()]
            items = read_items(files)
            if not items.rows:
                raise ConfigError(f"{self.name}: the data holds no items; give the official files")
            return items

        return ctx.cached(("mrcr", self.args.needles, self.args.revision, self.args.data_path, str(ctx.data_dir)), load)

    def prepare(self, ctx: GenContext) -> None:
        self.items(ctx)

    def hub_names(self) -> list[str]:
        """This needle count's parquet files at the pinned revision (as listed by the hub; HUB_FILES if it cannot list)."""
        n = self.args.needles
        try:
            from huggingface_hub import list_repo_files

            if not hub_reachable():
                raise OSError("offline")

            listed = sorted(f for f in list_repo_files(HUB, repo_type="dataset", revision=self.args.revision)
                            if f.startswith(f"{n}needle/") and f.endswith(".parquet"))
        except Exception:  # noqa: BLE001 - offline or an older client: the known names, downloaded (or refused) below
            listed = []
        return listed or [f.format(n=n) for f in HUB_FILES]

    def rendered(self, i: int, ctx: GenContext):
        """The rendered conversation of official item i and its token count."""
        try:
            messages = json.loads(self.items(ctx).prompt(i))
        except (TypeError, ValueError):
            raise ConfigError(f"{self.name}: item {i}'s prompt is not a JSON list of messages; give the official files") from None
        text = ctx.renderer.render(messages)
        return text, ctx.count(text)

    def _bin_key(self, ctx: GenContext) -> tuple:
        return ("mrcr", json.dumps(self.args_json(), sort_keys=True), str(ctx.data_dir))

    def samples_at(self, length: int, ctx: GenContext) -> int:
        """How many official items lie in length's bin (the plan's count for that length)."""
        items = self.items(ctx)
        return len(items_in_bin(ctx, self._bin_key(ctx), length, items.chars(), lambda i: self.size(i, ctx)))

    def size(self, i: int, ctx: GenContext) -> int:
        return self.rendered(i, ctx)[1] + self.max_new_tokens

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        items = self.items(ctx)
        row = bin_item(ctx, self._bin_key(ctx), length, index, items.chars(), lambda i: self.size(i, ctx), self.name)
        text, tokens = self.rendered(row, ctx)
        rec = items.rows[row]
        meta = {"row": row, "random_string_to_prepend": rec["random_string_to_prepend"], "size": tokens + self.max_new_tokens,
                **{k: rec.get(k) for k in ("n_needles", "desired_msg_index", "total_messages", "n_chars")}}
        return self.make_sample(length=length, index=index, text=text, tokens=tokens, answers=[rec["answer"]], meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        return grade(prediction, sample.answers[0], sample.meta["random_string_to_prepend"])


def _register(needles: int) -> None:
    def factory(**args):
        if args.get("needles", needles) != needles:
            raise ConfigError(f"needles: mrcr/{needles}needle has {needles}; use the task mrcr with needles: {args['needles']}")
        return Mrcr(f"mrcr/{needles}needle", MrcrArgs(**{**args, "needles": needles}))

    register("task", f"mrcr/{needles}needle", args=MrcrArgs)(factory)


@register("task", "mrcr", args=MrcrArgs)
def mrcr(**args):
    parsed = MrcrArgs(**args)
    return Mrcr(f"mrcr/{parsed.needles}needle", parsed)


for _n in (2, 4, 8):
    _register(_n)
