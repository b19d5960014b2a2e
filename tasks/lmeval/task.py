"""Short-context benchmarks (MMLU, ARC, HellaSwag, ...) run by lm-evaluation-harness through our backends.

These are not reimplemented: a task ``lmeval/<name>`` hands lm-eval task ``<name>`` (a task, group or tag)
to lm-eval with a ctxbench backend as the model, and turns lm-eval's logged samples into store rows:
task ``lmeval/<subtask>``, length 0, score in [0, 1] per document (acc for multiple choice). lm-eval's own
aggregates, with its stderr and MMLU's four categories, go to ``lmeval_results.json`` in the run directory
(``write_aggregates``). The task is external: the runner calls ``run_external`` instead of generating samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.tasks.base import Task, TaskArgs

# lm-eval tasks registered as lmeval/<name>; any other lm-eval task runs as lmeval/custom with args.tasks.
KNOWN = ("mmlu", "arc_easy", "arc_challenge", "hellaswag", "winogrande", "piqa", "logiqa", "lambada_openai",
         "truthfulqa_mc2", "boolq", "openbookqa", "sciq", "gsm8k")


class LMEvalArgs(TaskArgs):
    tasks: list[str] | None = Field(None, description="lm-eval task, group or tag names; default: the name after lmeval/")
    num_fewshot: int | None = Field(None, ge=0, description="few-shot examples; unset = the lm-eval task's default (0 for MMLU)")
    limit: float | None = Field(None, gt=0, description="documents per lm-eval subtask (below 1: a fraction); unset = all, or the runner's limit")
    include_path: str | list[str] | None = Field(None, description="directory (or list) of extra lm-eval task YAMLs (lm_eval --include_path)")
    builtin_tasks: bool = Field(True, description="index lm-eval's builtin tasks too (off: only include_path, much faster to start)")
    batch_size: int | None = Field(None, ge=1, description="inputs per forward pass; unset = the backend's batch size")
    apply_chat_template: bool = Field(False, description="let lm-eval wrap prompts in the tokenizer's chat template (papers: off)")
    fewshot_as_multiturn: bool = Field(False, description="with apply_chat_template: few-shot examples as chat turns")
    system_instruction: str | None = Field(None, description="system prompt lm-eval prepends")
    gen_kwargs: str | None = Field(None, description="generation overrides for generative tasks, e.g. 'max_gen_toks=64'")
    metric: str | None = Field(None, description="per-sample metric stored as the score; unset = acc, else the task's first 0..1 metric")
    filter: str | None = Field(None, description="lm-eval filter whose answers are stored (e.g. flexible-extract); unset = the first")
    bootstrap_iters: int = Field(100000, ge=0, description="lm-eval's bootstrap resamples for stderrs of non-mean metrics (0 = none)")

    @field_validator("tasks")
    @classmethod
    def _nonempty(cls, v):
        if v is not None and (not v or any(not t.strip() for t in v)):
            raise ValueError("name at least one lm-eval task, e.g. [mmlu]")
        return v


class LMEvalTask(Task):
    Args = LMEvalArgs
    category = "lm-eval"
    summary = "short-context benchmark {name}, run by lm-evaluation-harness through the ctxbench backend"
    data_source = "lm-eval's task data (hub), or --include-path YAMLs"
    metric = "lmeval"
    external = True  # the runner calls run_external instead of generating samples
    extra = "lmeval"  # checked when a suite's task is built, before any run directory exists

    def __init__(self, name: str, args: LMEvalArgs):
        super().__init__(name, args)
        self.last_results: dict[str, Any] | None = None  # lm-eval's results (without samples) of the last run_external

    @property
    def max_new_tokens(self) -> int:
        return 0

    def lmeval_tasks(self) -> list[str]:
        if self.args.tasks:
            return list(self.args.tasks)
        sub = self.name.split("/", 1)[1] if "/" in self.name else self.name
        if sub == "custom":
            raise ConfigError(f"{self.name}: args.tasks: required; the lm-eval task, group or tag names to run")
        return [sub]

    def is_complete(self, run_dir: str | Path) -> bool:
        """Whether a run already holds this task's lm-eval results (a rerun skips it)."""
        from ctxbench.tasks.lmeval.results import completed

        return self.name in completed(run_dir)

    def samples_per_length(self, ctx=None) -> int:
        return 0

    def generate(self, *, length: int, index: int, seed: int, ctx) -> Any:
        raise ConfigError(f"{self.name}: an lm-eval task has no generated samples; it runs through run_external")

    def run_external(self, *, backend: Any, renderer: Any = None, limit: int | float | None = None, seed: int = 42,
                     console: Any = None) -> list[dict[str, Any]]:
        """Run the lm-eval task(s) through ``backend``; return one store row per document.

        ``limit`` (documents per subtask) applies when args.limit is unset. ``renderer`` only lends its system
        prompt when args.apply_chat_template is on. Afterwards ``self.last_results`` holds lm-eval's results
        (without the samples), for ``write_aggregates(run_dir)``.
        """
        from ctxbench.tasks.lmeval import adapter as lx
        from ctxbench.tasks.lmeval.results import sample_rows

        a = self.args
        lim = a.limit if a.limit is not None else limit
        if lim is not None and lim >= 1:
            lim = int(lim)
        names = self.lmeval_tasks()
        if console is not None:
            console.print(f"lm-eval: {', '.join(names)} (limit {lim if lim is not None else 'none'}, "
                          f"{'default' if a.num_fewshot is None else a.num_fewshot}-shot)")
        system = a.system_instruction
        if system is None and a.apply_chat_template and renderer is not None:
            system = getattr(renderer, "system", None)
        old_bs = getattr(backend, "batch_size", None)
        if a.batch_size and old_bs is not None:
            backend.batch_size = a.batch_size
        paths = [a.include_path] if isinstance(a.include_path, str) else list(a.include_path or [])
        try:
            results = lx.evaluate(backend, names, num_fewshot=a.num_fewshot, limit=lim,
                                  include_path=[str(Path(p).expanduser()) for p in paths] or None,
                                  include_defaults=a.builtin_tasks, seed=seed, apply_chat_template=a.apply_chat_template,
                                  fewshot_as_multiturn=a.fewshot_as_multiturn, system_instruction=system,
                                  gen_kwargs=a.gen_kwargs, bootstrap_iters=a.bootstrap_iters)
        finally:
            if a.batch_size and old_bs is not None:
                backend.batch_size = old_bs
        rows = sample_rows(results, backend=backend, metric=a.metric, filter_name=a.filter)
        self.last_results = {k: v for k, v in results.items() if k != "samples"}
        self.last_results["ctxbench_task"] = self.name
        return rows

    def write_aggregates(self, run_dir: str | Path, results: dict[str, Any] | None = None) -> Path:
        """Write lm-eval's aggregates (default: the last run's) to ``<run_dir>/lmeval_results.json``, under this
        task's name, beside other tasks' entries."""
        from ctxbench.tasks.lmeval.results import write_aggregates

        results = self.last_results if results is None else results
        if results is None:
            raise RuntimeError(f"{self.name}: run_external has not run")
        return write_aggregates(run_dir, results, self.name)


def _factory(name: str):
    def make(**args):
        return LMEvalTask(name, LMEvalArgs(**args))

    return make


for _n in (*KNOWN, "custom"):
    register("task", f"lmeval/{_n}", args=LMEvalArgs)(_factory(f"lmeval/{_n}"))
