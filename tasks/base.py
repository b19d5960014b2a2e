"""What every task shares: arguments, seeding, grid axes, and the default per-sample score."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from ctxbench.harness.core.additivity import Additivity, check, refused
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.fitting import FitState
from ctxbench.harness.core.prompting import Rendered
from ctxbench.harness.core.reasoning import Split, split_reasoning
from ctxbench.harness.core.types import LogprobRequest, Sample, TokenLogprobs


class TaskArgs(BaseModel):
    """Base of every task's arguments: unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_points(value, *, top: float, name: str, unit: str):
    """Validate a grid axis given as a count N (N evenly spaced points) or a list of values in [0, top]."""
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"{name}: give a positive count or a list of {unit}")
        return value
    if not value or any(not 0 <= v <= top for v in value):
        raise ValueError(f"{name}: each value must be {unit} between 0 and {top:g}")
    return value


def points(value, *, top: float) -> list[float]:
    """The grid points of an axis validated by check_points (a single point sits in the middle)."""
    if isinstance(value, int):
        return [float(x) for x in np.round(np.linspace(0, top, value), 4)] if value > 1 else [top / 2]
    return [float(v) for v in value]


def check_depths(depths: list[float] | None, n: int, per: str) -> None:
    """Optional needle depths: one for all, or one per needle; percentages."""
    if depths is None:
        return
    if len(depths) not in (1, n):
        raise ValueError(f"depths: give 1 or {n} values (one per {per}), got {len(depths)}")
    check_points(depths, top=100, name="depths", unit="a percentage")


def rendered_edges(ctx: GenContext, head: str, tail: str, prefix: str) -> tuple[str, str] | None:
    """The rendered prompt around a task's context: (template + text before it, text after it + template + answer
    prefix); None if the template does not carry the task text verbatim."""
    mark = "\x00"
    text = ctx.renderer.render(head + mark + tail, prefix).text
    return tuple(text.split(mark)) if text.count(mark) == 1 else None  # type: ignore[return-value]


def sample_seed(*parts: Any) -> int:
    """A seed that depends only on its parts, so generation order never changes a sample."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


def files_under(paths, *, dirs: bool = True) -> list[Path]:
    """The existing files among `paths`; with `dirs`, a directory stands for every file below it."""
    out: list[Path] = []
    for p in paths:
        try:
            p = Path(p).expanduser()
            if p.is_file():
                out.append(p)
            elif dirs and p.is_dir():
                out += sorted(f for f in p.rglob("*") if f.is_file())
        except (OSError, ValueError):  # not a path at all (a template, a long text)
            continue
    return out


class Task:
    """A task = arguments + generator + metric. Subclasses set Args and implement generate.

    Its optional capabilities are declared here, with defaults, and the runner dispatches on them (never on
    hasattr): `needs` (generate, or prompt_logprobs with logprob_requests / score_logprobs), `external` (another
    harness drives it: run_external, is_complete, write_aggregates), `extra` (the pip extra it needs), samples_at
    (fixed items binned by length) and score_row (a score that may fail, e.g. a paid judge's)."""

    Args: ClassVar[type[TaskArgs]]
    category: ClassVar[str] = ""
    metric: ClassVar[str] = "string_match_all"
    summary: ClassVar[str] = ""  # what the task measures, one line; may name args as {arg} (and {name})
    data_source: ClassVar[str] = "none (generated)"  # the data it reads; may name args as {arg}
    needs: ClassVar[str] = "generate"  # the backend capability its samples are scored with (harness/core/backend.py)
    external: ClassVar[bool] = False  # another harness (lm-eval) drives it: the runner calls run_external, not generate
    extra: ClassVar[str | None] = None  # the pip extra it needs (checked when the task is built)
    reads_records: bool = False  # its samples are a dataset's records in order: `--samples N` keeps the first N
    shared_context: ClassVar[str] = ""  # what every sample shares with others when each carries a cluster id (a
    # context window, a document): its rounds are dependent, so `score --until` refuses it and `plan` says so

    def __init__(self, name: str, args: TaskArgs):
        self.name = name
        self.args = args

    @property
    def max_new_tokens(self) -> int:
        return self.args.tokens_to_generate  # type: ignore[attr-defined]

    @property
    def past_length(self) -> int:
        """Tokens a sample may generate past its length: 0 where prompt + answer fit within it (every task but one
        that fills the length with its prompt, as RULER v2's official code does); the context must hold both."""
        return 0

    def args_json(self) -> dict[str, Any]:
        return self.args.model_dump(mode="json")

    def rngs(self, length: int, index: int, seed: int) -> tuple[random.Random, np.random.Generator]:
        s = sample_seed(self.name, self.args_json(), length, index, seed)
        return random.Random(s), np.random.default_rng(s)

    def fit_state(self, ctx: GenContext, length: int) -> FitState:
        key = (self.name, json.dumps(self.args_json(), sort_keys=True), length)
        state = ctx.fit_states.get(key)
        if state is None:
            additive = ctx.verify == "fast" and self.additivity(ctx).additive
            state = ctx.fit_states[key] = FitState(verify=ctx.verify, additive=additive)
        return state

    def boundary_probes(self, ctx: GenContext) -> dict[str, list[list[str]]] | Additivity | None:
        """Per kind of boundary in this task's prompts, sequences of real pieces in prompt order (see core.additivity),
        built from fixed draws so that the check is cached per tokenizer. None: not declared, so every prompt is
        tokenized in full; an Additivity from `refused(reason)`: the fast path cannot apply."""
        return None

    def additivity(self, ctx: GenContext) -> Additivity:
        """Whether this task's piece counts may be trusted on ctx's tokenizer and template (once per context)."""
        def make() -> Additivity:
            probes = self.boundary_probes(ctx)
            if probes is None:
                return refused("the task declares no boundary probes")
            return probes if isinstance(probes, Additivity) else check(ctx, probes)

        return ctx.cached(("additivity", self.name, json.dumps(self.args_json(), sort_keys=True), ctx.renderer.template), make)

    def make_sample(self, *, length: int, index: int, text: Rendered, tokens: int, answers, depths=(), meta=None) -> Sample:
        return Sample(
            task=self.name,
            length=length,
            index=index,
            prompt=text.text,
            answers=tuple(answers),
            prompt_tokens=tokens,
            max_new_tokens=self.max_new_tokens,
            depths=tuple(round(float(d), 2) for d in depths),
            metric=self.metric,
            add_special_tokens=text.add_special_tokens,
            user_span=text.user_span,
            answer_prefix=text.prefix,
            turns=text.turns,
            meta=(meta or {}) if text.user_span is not None or not text.user else {**(meta or {}), "user_text": text.user},
        )

    def describe(self) -> str:
        """One line for `ctxbench tasks`: what this task (with its arguments) measures."""
        return self.summary.format(name=self.name, **self.args_json()) if self.summary else self.category

    def data_needs(self) -> str:
        """One line for `ctxbench tasks`: the data it reads (local under --data-dir, or downloaded once)."""
        return self.data_source.format(name=self.name, **self.args_json())

    def data_files(self, ctx: GenContext) -> list[Path]:
        """The local files this task reads; the sample cache is keyed by their content, so replacing a file under
        the same path regenerates. Default: the files named by the task's arguments (tasks that read a directory,
        or a default place under data_dir, override this)."""
        return files_under((v for v in self.args_json().values() if isinstance(v, str)), dirs=False)

    def prepare(self, ctx: GenContext) -> None:
        """Read and check the data this task needs, before a run writes anything (bad data is one line, and no
        half-made run directory). Kept in ctx's caches, so generation does not read it again. Default: nothing."""

    def samples_per_length(self, ctx: GenContext | None = None) -> int | None:
        """How many samples this task has per length; None = as many as the suite asks for."""
        return None

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext) -> Sample:
        raise NotImplementedError

    def score(self, prediction: str, sample: Sample) -> float:
        """Per-sample score in [0, 1]. Override for metrics that need more than the references."""
        from ctxbench.harness.core import registry

        return registry.get("metric", sample.metric)(prediction, sample.answers)

    def split_thinking(self, text: str, sample: Sample, *, api_reasoning: str | None, opened: bool) -> Split:
        """Thinking mode: the answer scored and the reasoning stored (harness/core/reasoning.py). A benchmark whose
        official code splits otherwise overrides it (HELMET: after the last </think>, an open block scored as text)."""
        return split_reasoning(text, api_reasoning=api_reasoning, opened=opened)

    def score_row(self, prediction: str, sample: Sample) -> tuple[float | None, dict[str, Any], str | None]:
        """(score, extra row fields, error). A scorer that can fail (a paid judge) returns an error: the sample is
        then an error row a rerun retries, never a 0. Default: score(), which cannot fail that way."""
        return self.score(prediction, sample), {}, None

    def samples_at(self, length: int, ctx: GenContext) -> int | None:
        """Fixed items binned by length: how many fall at `length`; None = not binned (as many as planned)."""
        return None

    # --- log-prob tasks (needs = "prompt_logprobs", e.g. perplexity) ---
    def logprob_requests(self, sample: Sample) -> list[LogprobRequest]:
        """The token windows whose log-probs score this sample."""
        raise NotImplementedError(f"{self.name}: needs = {self.needs!r}, not prompt_logprobs")

    def score_logprobs(self, sample: Sample, results: list[TokenLogprobs]) -> dict[str, Any]:
        """The row fields (score, loss, ...) from the windows' log-probs."""
        raise NotImplementedError(f"{self.name}: needs = {self.needs!r}, not prompt_logprobs")

    # --- external tasks (external = True: another harness produces the rows) ---
    def run_external(self, *, backend: Any, renderer: Any = None, limit: int | float | None = None, seed: int = 42,
                     console: Any = None) -> list[dict[str, Any]]:
        """Run the task in its own harness; returns the store rows."""
        raise NotImplementedError(f"{self.name}: not an external task")

    def is_complete(self, run_dir: str | Path) -> bool:
        """An external task's rows are already in this run."""
        raise NotImplementedError(f"{self.name}: not an external task")

    def write_aggregates(self, run_dir: str | Path) -> Path:
        """An external task's own aggregates beside the rows."""
        raise NotImplementedError(f"{self.name}: not an external task")
