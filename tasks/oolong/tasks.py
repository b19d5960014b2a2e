"""The Oolong tasks (`oolong/synth`, `oolong/real`): classify or read every chunk of a long context window, then
count, compare or list (Bertsch et al. 2025, arXiv:2511.02817).

The official items are fixed context windows with 25 questions each (synth) or a varying number (real, D&D
transcripts). A window is scored whole at the length bin of its real size under the scored model's tokenizer
(tasks/length_bins.py: its prompt with its longest question, plus the answer budget, in (L/2, L]); every question
of the window lands in that bin and carries the window as its cluster, so intervals are cluster-robust and
`--until` refuses the task (its questions are not independent).

The prompt is the official eval script's: a system message "You are a helpful assistant." followed by the window's
text, then the question as the user message (`prompt: card` sends the dataset card's single message
`context + "\\n" + question` instead). Scoring is eval_helpers.py's (tasks/oolong/scoring.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.length_bins import bin_edges, items_in_bin
from ctxbench.tasks.oolong.items import OolongItems, Window, read_items
from ctxbench.tasks.oolong.scoring import Parsed, dnd_score, synth_score
from ctxbench.tasks.realdata import hub_file, hub_reachable

SYSTEM = "You are a helpful assistant."
SYSTEM_JOIN = "\n"  # the official system message is two text parts (this line, the window); ctxbench turns are text
HUBS = {"synth": "oolongbench/oolong-synth", "real": "oolongbench/oolong-real"}
REVISIONS = {"synth": "f0d59eaf0febf130664cfceb710436c8e3216b2b", "real": "6bc9ef04866fcf005c9749b70649be69dd37fffb"}
HUB_FILES = {"synth": ("data/test-", "data/test-00000-of-00001.parquet"), "real": ("dnd/test", "dnd/test.jsonl")}  # (prefix, fallback)
MAX_NEW_TOKENS = 512


class OolongArgs(TaskArgs):
    """What both splits take."""

    data_path: str | None = Field(None, description="local copy: a directory of the split's official files (*.parquet or "
                                                     "*.jsonl, the hub's columns); default: data_dir/oolong/<split>/, else the hub")
    labels: bool = Field(False, description="show the window with its gold labels (context_window_text_with_labels), as the "
                                            "official --labels flag")
    prompt: Literal["script", "card"] = Field("script", description="script: the official eval script's system + user messages; "
                                                                    "card: the dataset card's one message, context + newline + question")
    windows: int | None = Field(None, ge=1, description="score at most the first N context windows of each length bin (each "
                                                        "brings all its questions); default: every window, capped by the suite's samples")
    max_new_tokens: int = Field(MAX_NEW_TOKENS, ge=1, description="tokens the answer may take (counted in a window's size)")


class OolongSynthArgs(OolongArgs):
    revision: str = Field(REVISIONS["synth"], description="commit of the oolongbench/oolong-synth hub dataset to download")
    strip_markup: bool = Field(False, description="strip the parsed answer again after removing * [ ] (the intent of the official "
                                                  "comment); default: as the official code runs, where '**Answer:** x' misses")


class OolongRealArgs(OolongArgs):
    revision: str = Field(REVISIONS["real"], description="commit of the oolongbench/oolong-real hub dataset to download (dnd config)")


ARGS = {"synth": OolongSynthArgs, "real": OolongRealArgs}


class Oolong(Task):
    Args = OolongArgs  # each split registers its own subclass (ARGS)
    category = "aggregation"
    summary = ("{name}: classify or read every chunk of a long context window, then count, compare or list "
               "(Oolong); official windows binned by real token length, a window's questions one cluster")
    data_source = ("oolongbench/oolong-{split} (hub, pinned revision; downloaded at run time), or data_path / "
                   "data_dir/oolong/{split}/")
    requires_data = True
    shared_context = "context window"

    def __init__(self, name: str, args: OolongArgs, split: str):
        super().__init__(name, args)
        self.split = split
        self.metric = f"oolong/{split}"

    def describe(self) -> str:
        return self.summary.format(name=self.name)

    def data_needs(self) -> str:
        return self.data_source.format(split=self.split)

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def local_files(self, data_dir: Path | None) -> list[Path] | None:
        if self.args.data_path:
            root = Path(self.args.data_path).expanduser()
            if not root.is_dir():
                raise ConfigError(f"data_path: {self.args.data_path} is not a directory; give a folder of the official files")
        elif data_dir is not None and (data_dir / "oolong" / self.split).is_dir():
            root = data_dir / "oolong" / self.split
        else:
            return None
        found = sorted(root.glob("*.parquet")) + sorted(root.glob("*.jsonl"))
        if not found:
            raise ConfigError(f"data_path: {root} has no *.parquet or *.jsonl; give the official {HUBS[self.split]} files")
        return found

    def data_files(self, ctx: GenContext) -> list[Path]:
        return self.local_files(ctx.data_dir) or []

    def hub_names(self) -> list[str]:
        prefix, fallback = HUB_FILES[self.split]
        try:
            from huggingface_hub import list_repo_files

            if not hub_reachable():
                raise OSError("offline")
            listed = list_repo_files(HUBS[self.split], repo_type="dataset", revision=self.args.revision)
        except Exception:  # noqa: BLE001 - offline or an older client: the known name, downloaded (or refused) below
            listed = []
        return sorted(f for f in listed if f.startswith(prefix) and f.endswith((".parquet", ".jsonl"))) or [fallback]

    def items(self, ctx: GenContext) -> OolongItems:
        def load() -> OolongItems:
            files = self.local_files(ctx.data_dir)
            if files is None:
                hint = f"put the files at data_dir/oolong/{self.split}/ (from the {HUBS[self.split]} hub repo) or pass data_path"
                files = [hub_file(HUBS[self.split], f, what=self.name, hint=hint, revision=self.args.revision) for f in self.hub_names()]
            items = read_items(files)
            if not items.rows:
                raise ConfigError(f"{self.name}: the data holds no items; give the official files")
            return items

        return ctx.cached(("oolong", self.split, self.args.revision, self.args.data_path, str(ctx.data_dir)), load)

    def prepare(self, ctx: GenContext) -> None:
        self.items(ctx)

    def messages(self, context: str, question: str) -> list[dict[str, str]]:
        if self.args.prompt == "card":
            return [{"role": "user", "content": f"{context}\n{question}"}]
        return [{"role": "system", "content": f"{SYSTEM}{SYSTEM_JOIN}{context}"}, {"role": "user", "content": question}]

    def context(self, window: Window, ctx: GenContext) -> str:
        column = "context_window_text_with_labels" if self.args.labels else "context_window_text"
        return self.items(ctx).text(window, column)

    def window_size(self, w: int, ctx: GenContext) -> int:
        """Window w's size: its prompt with its longest question (by characters), plus the answer budget."""
        items = self.items(ctx)
        window = items.windows[w]
        longest = max(window.rows, key=lambda r: len(items.rows[r]["question"]))
        text = ctx.renderer.render(self.messages(self.context(window, ctx), items.rows[longest]["question"]))
        return ctx.count(text) + self.max_new_tokens

    def _bin_key(self, ctx: GenContext) -> tuple:
        return ("oolong", self.split, json.dumps(self.args_json(), sort_keys=True), str(ctx.data_dir))

    def bin_windows(self, length: int, ctx: GenContext) -> list[int]:
        chars = [w.chars for w in self.items(ctx).windows]
        found = items_in_bin(ctx, self._bin_key(ctx), length, chars, lambda w: self.window_size(w, ctx))
        return found[: self.args.windows] if self.args.windows else found

    def samples_at(self, length: int, ctx: GenContext) -> int:
        """The questions of the windows in length's bin (the plan's count for that length)."""
        windows = self.items(ctx).windows
        return sum(len(windows[w].rows) for w in self.bin_windows(length, ctx))

    def question_at(self, length: int, index: int, ctx: GenContext) -> tuple[Window, int]:
        """(window, official row) of sample `index` of length's bin: the bin's windows' questions in order."""
        windows = self.items(ctx).windows
        offset = index
        for w in self.bin_windows(length, ctx):
            if offset < len(windows[w].rows):
                return windows[w], windows[w].rows[offset]
            offset -= len(windows[w].rows)
        low, high = bin_edges(length)
        raise ConfigError(f"{self.name}: sample {index} is out of range; the bin of length {length} ({low}-{high} tokens "
                          f"under this tokenizer) holds {index - offset} questions (lower the suite's samples)")

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        window, row = self.question_at(length, index, ctx)
        rec = self.items(ctx).rows[row]
        rendered = ctx.renderer.render(self.messages(self.context(window, ctx), rec["question"]))
        tokens = ctx.count(rendered)
        meta = {"row": row, "id": rec["id"], "context_window_id": window.window_id, "answer_type": rec.get("answer_type"),
                "cluster": f"{self.name}:{window.window_id}", "size": tokens + self.max_new_tokens,
                **{k: rec[k] for k in ("task", "task_group", "dataset", "context_len", "question_type") if k in rec}}
        return self.make_sample(length=length, index=index, text=rendered, tokens=tokens, answers=[str(rec["answer"])],
                                meta=meta)

    def grade(self, prediction: str, sample: Sample) -> Parsed:
        if self.split == "synth":
            return synth_score(prediction, sample.answers[0], sample.meta.get("answer_type") or "",
                               strip_markup=self.args.strip_markup)  # type: ignore[attr-defined]
        return dnd_score(prediction, sample.answers[0])

    def score(self, prediction: str, sample: Sample) -> float:
        return self.grade(prediction, sample).score

    def score_row(self, prediction: str, sample: Sample) -> tuple[float | None, dict[str, Any], str | None]:
        graded = self.grade(prediction, sample)
        return graded.score, {"parse": {"answer": graded.attempted_parse, "confidence": graded.parse_confidence}}, None


def _register(split: str) -> None:
    def factory(**args):
        return Oolong(f"oolong/{split}", ARGS[split](**args), split)

    factory.__doc__ = f"Oolong-{split}: the official {HUBS[split]} items."
    register("task", f"oolong/{split}", args=ARGS[split])(factory)


for _split in ("synth", "real"):
    _register(_split)
