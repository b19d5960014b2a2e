"""BABILong qa1-qa10 (`babilong/qa1` ... `babilong/qa10`), RMT-team/babilong: bAbI facts hidden in PG-19 text.

The data is a fixed item set per nominal length: the hub dataset's configs are the lengths ("0k", "1k",
"2k", "4k" ... "128k", "256k", "512k", "1M", "10M") and its splits the tasks (qa1 ... qa20). A sample of
length L reads the largest official split whose nominal size is at most L (4096 -> "4k", 1000000 -> "1M";
under 1000 -> "0k"), or the split given as `split`. Its prompt is the official default one (instruction,
examples, post-prompt, then "<context>...</context>" and the question; tasks/babilong/prompts.py), rendered
with the suite's template; 20 new tokens, as the official run script. The nominal sizes are GPT-2 tokens
of the whole prompt (data/create_tasks.py builds "4k" as 4000 - 300 tokens of context, 300 for the prompt):
when the scored model's tokenizer makes a prompt too long for its length, the background text is cut in the
middle as for LongBench (meta["truncated_tokens"] says how much; a cut can remove a fact).

With `binned: true` no item is cut: a length L reads the items of the splits near it (nominal size from L/4 to 2L,
and 0k up to 4K) and scores each whole at the length bin of its real size under the scored model's tokenizer,
(L/2, L] (tasks/length_bins.py); a suite's lengths, 128K and past it, then select items by their real length.

Scoring is the official exact-label check (babilong/metrics.py compare_answers), implemented here:
lower-case, keep the first sentence (up to the first "."), cut at "<context>" or "<example>"; find every
task label occurring as a substring; drop labels that occur in the question; the answer is right when the
remaining labels are exactly the target's (qa8's "apple,milk" needs both and nothing else). The official
cut at "Question" comes after lower-casing and so never fires; we keep that. Substring labels make some
answers wrong that read right: in qa7, "none" contains the label "one", so it is never counted correct.

Licence: BABILong's code and data are Apache-2.0; the facts come from bAbI (BSD) and the background from
PG-19 (Apache-2.0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Sample
from ctxbench.tasks.babilong.prompts import PROMPTS
from ctxbench.tasks.base import Task, TaskArgs
from ctxbench.tasks.length_bins import items_in_bin
from ctxbench.tasks.realdata import fit_context, hub_dataset, read_records

HUBS = {"100": "RMT-team/babilong", "1k": "RMT-team/babilong-1k-samples"}
SPLITS: dict[str, int] = {"0k": 0, "1k": 1000, "2k": 2000, "4k": 4000, "8k": 8000, "16k": 16000, "32k": 32000, "64k": 64000,
                          "128k": 128000, "256k": 256000, "512k": 512000, "1M": 1_000_000, "10M": 10_000_000}
ONE_K_TASKS = ("qa1", "qa2", "qa3", "qa4", "qa5")  # the 1000-sample variant has only these
ROOMS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
LABELS: dict[str, tuple[str, ...]] = {
    "qa1": ROOMS, "qa2": ROOMS, "qa3": ROOMS, "qa4": ROOMS,
    "qa5": ("Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"),
    "qa6": ("no", "yes"),
    "qa7": ("none", "one", "three", "two"),
    "qa8": ("apple", "football", "milk", "nothing"),
    "qa9": ("no", "yes"),
    "qa10": ("maybe", "no", "yes"),
}
MAX_NEW_TOKENS = 20  # scripts/run_model_on_babilong.py


def first_sentence(output: str) -> str:
    """The official cut of a response: lower-cased, up to the first '.', before any '<context>' or '<example>'."""
    text = output.lower().split(".")[0]
    return text.split("<context>")[0].split("<example>")[0]


def label_correct(target: str, output: str, question: str, labels) -> bool:
    """BABILong's exact-label check: the labels said in the answer's first sentence, less those in the question,
    must be exactly the target's labels (substring matches, as the official scorer finds them)."""
    said_text, asked_text = first_sentence(output), question.lower()
    names = {label.lower() for label in labels}
    said = {n for n in names if n in said_text} - {n for n in names if n in asked_text}
    target = target.lower()
    if "," in target and len(target) > 3:  # qa8's several objects, "apple,milk"
        parts = target.split(",")
        return len(said) == len(parts) and all(p in said for p in parts)
    return said == {target}


class BabilongArgs(TaskArgs):
    variant: Literal["100", "1k"] = Field("100", description="'100': RMT-team/babilong (100 items per task and length); "
                                                              "'1k': RMT-team/babilong-1k-samples (1000 items, qa1-qa5 only)")
    split: str | None = Field(None, description="official length split to read at every length (0k, 1k, 2k, 4k ... 128k, 256k, "
                                                "512k, 1M, 10M); default: the largest whose nominal size is at most the length")
    data_path: str | None = Field(None, description="local copy laid out as the hub repo: <split>/<task>.jsonl|.json|.parquet "
                                                     "(or the hub's <split>/<task>-00000-of-00001.parquet); default: data_dir/babilong/, else the hub")
    limit: int | None = Field(None, ge=1, description="use only the first N items of each split, in the official order; "
                                                      "default: the suite's samples")
    max_new_tokens: int = Field(MAX_NEW_TOKENS, ge=1, description="tokens to generate (official: 20)")
    binned: bool = Field(False, description="score each item whole at the length bin of its real token length, (L/2, L], "
                                            "from the splits near L, instead of cutting one split's items to L")


def split_for(length: int) -> str:
    """The largest official split whose nominal size is at most `length`."""
    return max((name for name, size in SPLITS.items() if size <= length), key=SPLITS.__getitem__)


class Babilong(Task):
    Args = BabilongArgs
    category = "reasoning"
    metric = "babilong/label"
    summary = "{name}: bAbI facts spread through PG-19 text, the official items of each length split, exact-label scoring"
    data_source = "RMT-team/babilong (hub; variant 1k: babilong-1k-samples), or data_path / data_dir/babilong/<split>/<task>.*"
    requires_data = True

    def __init__(self, qa: str, args: BabilongArgs):
        if args.variant == "1k" and qa not in ONE_K_TASKS:
            raise ConfigError(f"variant: the 1000-sample BABILong set has only {', '.join(ONE_K_TASKS)}; use variant '100' for {qa}")
        if args.split is not None and args.split not in SPLITS:
            raise ConfigError(f"split: unknown BABILong split {args.split!r}; one of {', '.join(SPLITS)}")
        super().__init__(f"babilong/{qa}", args)
        self.qa = qa

    @property
    def max_new_tokens(self) -> int:
        return self.args.max_new_tokens

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        return self.args.limit

    def root(self, data_dir: Path | None) -> Path | None:
        """The local copy: data_path, else data_dir/babilong (or babilong-1k-samples), if it exists."""
        if self.args.data_path:
            path = Path(self.args.data_path).expanduser()
            if not path.is_dir():
                raise ConfigError(f"data_path: {self.args.data_path} is not a directory; give a copy laid out as <split>/<task>.jsonl")
            return path
        sub = "babilong" if self.args.variant == "100" else "babilong-1k-samples"
        return data_dir / sub if data_dir is not None and (data_dir / sub).is_dir() else None

    def local_file(self, root: Path, split: str) -> Path | None:
        folder = root / split
        named = [folder / f"{self.qa}.{ext}" for ext in ("jsonl", "json", "parquet")]
        found = [p for p in named if p.is_file()] + sorted(folder.glob(f"{self.qa}-*.parquet"))
        return found[0] if found else None

    def data_files(self, ctx: GenContext) -> list[Path]:
        root = self.root(ctx.data_dir)
        if root is None:
            return []
        return [f for f in (self.local_file(root, s) for s in SPLITS) if f is not None]

    def items(self, split: str, ctx: GenContext) -> list[dict[str, Any]]:
        """The official items of one length split, in order (cached per context)."""
        def load() -> list[dict[str, Any]]:
            root = self.root(ctx.data_dir)
            hint = f"put the files at data_dir/babilong/{split}/{self.qa}.jsonl (or pass data_path)"
            if root is None:
                return hub_dataset(HUBS[self.args.variant], name=split, split=self.qa, what=self.name, hint=hint)
            path = self.local_file(root, split)
            if path is None:
                raise ConfigError(f"data_path: {root} has no {split}/{self.qa}.jsonl (nor .json, .parquet); {hint}")
            return _read_items(path)

        rows = ctx.cached(("babilong", self.args.variant, self.args.data_path, str(ctx.data_dir), split, self.qa), load)
        if rows and not {"input", "question", "target"} <= set(rows[0]):
            raise ConfigError(f"{self.name}: split {split} needs the fields input, question and target; give the official files")
        return rows

    def near_splits(self, length: int, ctx: GenContext) -> list[str]:
        """Binned: the splits whose items may lie in length's bin (nominal sizes are GPT-2 tokens of the prompt)."""
        if self.args.split:
            return [self.args.split]
        root = self.root(ctx.data_dir)
        near = [s for s, size in SPLITS.items() if length // 4 <= size <= 2 * length or (size == 0 and length <= 4096)]
        return [s for s in near if root is None or self.local_file(root, s) is not None]

    def binned_items(self, length: int, ctx: GenContext) -> list[tuple[str, int]]:
        """Binned: (split, item) of every item in length's bin, splits in size order, items in official order."""
        out = []
        for split in self.near_splits(length, ctx):
            rows = self.items(split, ctx)
            key = ("babilong", self.name, self.args.variant, self.args.data_path, str(ctx.data_dir), split, self.max_new_tokens)
            size = lambda i, rows=rows: self.render(rows[i], ctx)[1] + self.max_new_tokens  # noqa: E731
            out += [(split, i) for i in items_in_bin(ctx, key, length, [len(str(r["input"])) for r in rows], size)]
        return out

    def samples_at(self, length: int, ctx: GenContext) -> int | None:
        return len(self.binned_items(length, ctx)) if self.args.binned else None

    def render(self, rec: dict[str, Any], ctx: GenContext):
        """The whole item rendered (binned mode: never cut) and its token count."""
        head, tail = self.edges(rec)
        text = ctx.renderer.render(head + str(rec["input"]).strip() + tail)
        return text, ctx.count(text)

    def edges(self, rec: dict[str, Any]) -> tuple[str, str]:
        instruction, examples, post_prompt = PROMPTS[self.qa]
        head = f"{instruction}\n\n{examples}\n\n{post_prompt}\n\n<context>\n".lstrip()
        return head, f"\n</context>\n\nQuestion: {rec['question']}".rstrip()

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        split, row = self.args.split or split_for(length), index
        if self.args.binned:
            found = self.binned_items(length, ctx)
            if 0 <= index < len(found):
                split, row = found[index]
            else:
                raise ConfigError(f"{self.name}: sample {index} is out of range; the bin of length {length} holds {len(found)} "
                                  "items under this tokenizer (lower the suite's samples)")
        rows = self.items(split, ctx)
        if not 0 <= row < len(rows):
            raise ConfigError(f"{self.name}: sample {index} is out of range; split {split} has {len(rows)} items "
                              "(lower the suite's samples or set limit)")
        rec = rows[row]
        head, tail = self.edges(rec)
        fit = fit_context(ctx, lambda c: ctx.renderer.render(head + c + tail), str(rec["input"]).strip(), length=length,
                          max_new_tokens=self.max_new_tokens, what=f"{self.name} item {index} of split {split}")
        meta = {"split": split, "question": rec["question"], "template": ctx.renderer.template, **({"row": row} if self.args.binned else {}),
                "truncated_tokens": fit.truncated_tokens, "context_tokens": fit.context_tokens}
        return self.make_sample(length=length, index=index, text=fit.rendered, tokens=fit.tokens,
                                answers=[str(rec["target"])], meta=meta)

    def score(self, prediction: str, sample: Sample) -> float:
        return float(label_correct(sample.answers[0], prediction, sample.meta["question"], LABELS[self.qa]))


def _read_items(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return read_records(path)


def _register(qa: str) -> None:
    def factory(**args):
        return Babilong(qa, BabilongArgs(**args))

    register("task", f"babilong/{qa}", args=BabilongArgs)(factory)


for _qa in LABELS:
    _register(_qa)
