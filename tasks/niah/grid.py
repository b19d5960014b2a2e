"""Kamradt-style needle-in-a-haystack over a length × depth grid (`niah/single`, `niah/multi`).

A sample's index picks its grid cell: depth = depths[index % len(depths)], repeated samples_per_cell
times. The default needle is RULER's key-value needle, so scoring is exact substring match, not an
LLM judge. Every prompt of one length shares the haystack prefix up to its first needle, so a
backend with prefix caching reuses it when requests are ordered by prompt (the runner does this).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.registry import register
from ctxbench.tasks.base import Task, TaskArgs, check_points, points
from ctxbench.tasks.haystacks import essay_files, essay_haystack, essays_path
from ctxbench.tasks.ruler.niah import ANSWER_PREFIX, NEEDLE, TEMPLATE, Niah, NiahArgs


class GridArgs(TaskArgs):
    depths: list[float] | int = Field(11, description="depth percentages, or N for N evenly spaced depths from 0 to 100")
    samples_per_cell: int = Field(1, ge=1, description="samples at each (length, depth) cell")
    num_needles: int = Field(1, ge=1, description="needles per prompt; >1 spreads them from the cell's depth to 100 and scores recall")
    haystack: str | None = Field(None, description="text file or directory of .txt files; default: the Paul Graham essays")
    key_type: Literal["words", "numbers", "uuids"] = Field("words", description="type of the needle key")
    value_type: Literal["words", "numbers", "uuids"] = Field("numbers", description="type of the needle value")
    needle: str = Field(NEEDLE, description="needle with {type_v}, {key}, {value} placeholders")
    template: str = TEMPLATE
    answer_prefix: str = ANSWER_PREFIX
    tokens_to_generate: int = Field(64, ge=1)

    @field_validator("depths")
    @classmethod
    def _depths(cls, v):
        return check_points(v, top=100, name="depths", unit="a percentage")

    def depth_list(self) -> list[float]:
        return points(self.depths, top=100)


class NiahGrid(Task):
    Args = GridArgs
    category = "retrieval"
    summary = "NIAH length x depth grid: {num_needles} needle(s) at each of the depths, exact scoring"
    data_source = "pg_essays/ (Paul Graham essays; downloaded once if no --data-dir)"
    shared_context = "haystack"  # a grid's depths move the same needles through one haystack
    metric = "string_match_all"

    def prepare(self, ctx: GenContext) -> None:
        essay_haystack(ctx, self.args.haystack)

    def data_files(self, ctx: GenContext):
        return essay_files(essays_path(self.args.haystack, ctx.data_dir))

    def samples_per_length(self, ctx: GenContext | None = None) -> int:
        return len(self.args.depth_list()) * self.args.samples_per_cell

    def generate(self, *, length: int, index: int, seed: int, ctx: GenContext):
        a = self.args
        grid = a.depth_list()
        depth = grid[index % len(grid)]
        k = a.num_needles
        depths = [depth] if k == 1 else [float(d) for d in np.linspace(depth, 100.0, k)]  # spread to the end
        inner = self._inner(depths)
        inner.fit_state = lambda c, n: self.fit_state(c, n)  # one fit state per grid task and length, not per cell
        draw = index // len(grid)  # the haystack and needles; the cell's depths move the same needles through it
        s = inner.generate(length=length, index=draw, seed=seed, ctx=ctx)
        meta = {**s.meta, "depth": depth, "cluster": f"{self.name}:{length}:{seed}:{draw}"}  # one id per shared haystack
        return type(s)(**{**s.__dict__, "index": index, "meta": meta})


    def _inner(self, depths: list[float]) -> Niah:
        a = self.args
        k = a.num_needles
        return Niah(self.name, NiahArgs(
            haystack="essay", essays=a.haystack, key_type=a.key_type, value_type=a.value_type, num_keys=k, num_queries=k,
            depths=depths, tokens_to_generate=a.tokens_to_generate, template=a.template, answer_prefix=a.answer_prefix,
            needle=a.needle,
        ))

    def boundary_probes(self, ctx: GenContext):
        """The boundaries of the NIAH prompts this grid builds (depths do not change which kinds occur)."""
        return self._inner([50.0]).boundary_probes(ctx)


@register("task", "niah/single", args=GridArgs, effective_length="ruler")
def niah_single(**args):
    return NiahGrid("niah/single", GridArgs(**args))


@register("task", "niah/multi", args=GridArgs, effective_length="ruler")
def niah_multi(**args):
    return NiahGrid("niah/multi", GridArgs(**{"num_needles": 3, **args}))
