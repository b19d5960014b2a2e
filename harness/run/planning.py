"""The plan step: every check of a score run, before its store opens and before the model's weights load.

`prepare(plan)` refuses, with one line and nothing written: lengths over the upper bound or a plan larger than the
memory it would take (both with a memory and time estimate), lengths over the model's context (from its config:
backends with a light `plan` view never load weights here), a backend without a capability a task needs, bad task
data, a length too short for a task (its first sample is built), and a resume whose record names other weights,
another tokenizer or other prediction-changing arguments. It also says whether the run is already complete, so a
finished rerun prints its table without loading the model.

The run id hashes identity only: the suite, the model, the backend and the backend arguments that can change a
prediction (each backend's execution-only arguments, core/identity.py, are left out), so a resume may change threads, batch size or device.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbench.harness.core import datasets, registry
from ctxbench.harness.core.backend import require
from ctxbench.harness.core.config import Suite, build_task
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.errors import ConfigError, PromptTooLongError
from ctxbench.harness.core.fitting import resolve_mode
from ctxbench.harness.core.identity import execution_args, identity_args, resolve_auto
from ctxbench.harness.core.io import slug
from ctxbench.harness.core.models import tokenizer_fingerprint, weights_fingerprint
from ctxbench.harness.core.prompting import PromptRenderer
from ctxbench.harness.core.redact import redact_all, url_secrets
from ctxbench.harness.core.store import RunStore, check_identity
from ctxbench.harness.core.task_versions import suite_task_versions
from ctxbench.harness.core.types import Generation, board_name, repeat_id, run_fingerprint
from ctxbench.harness.run.cost_guard import plan_cost
from ctxbench.harness.run.judge_budget import JudgeBudget, JudgeCost, check_budget, judge_cost
from ctxbench.harness.run.plan_bounds import check_counts
from ctxbench.harness.run.plan_size import Estimate, check_size, estimate
from ctxbench.tasks.base import Task


@dataclass(frozen=True)
class RunPlan:
    suite: Suite
    model: str
    backend: str
    backend_args: dict[str, Any]
    out_dir: Path
    data_dir: Path | None = None
    label: str = ""  # display name on leaderboards (default: the model)
    shard: tuple[int, int] = (0, 1)  # (i, n): this process scores the i-th of n disjoint parts of the suite
    generation: Generation = Generation()  # the protocol: thinking, system turn, sampling, repeats
    until: Any = None  # a sequential run's stopping rule (harness/adaptive.Until): execution, not identity
    sample_cap: int | None = None  # --samples given: fixed-item tasks score their first N items too
    log: str | None = None  # the session's third-party log, relative to the run directory (harness/run_log.py)

    def resolved(self, thinking: str) -> RunPlan:
        """The plan with its thinking mode resolved (auto: on where the chat template has a switch)."""
        import dataclasses

        return dataclasses.replace(self, generation=dataclasses.replace(self.generation, thinking=thinking))

    def identity_args(self) -> dict[str, Any]:
        """The backend arguments that can change a prediction (dtype, RoPE scaling, context, ...)."""
        return identity_args(self.backend, self.backend_args)

    def execution_args(self) -> dict[str, Any]:
        """The backend arguments that change only speed (threads, batch size, device, ...): recorded per session."""
        return {**execution_args(self.backend, self.backend_args), **({"log": self.log} if self.log else {})}

    def run_id(self) -> str:
        """`<label>-<suite>-<hash of identity>`; a run an older ctxbench started (it hashed every argument) is
        found by its record, so a resume with other execution settings continues it.

        A label whose slug loses something (CJK, punctuation, over 40 characters) has the full label in the hash, so
        two labels never share a run; an ASCII label that is its own slug keeps the id it always had, and a run of a
        lossy label stored under the older id (no label in its hash) is still found by the label in its record."""
        ident = {"suite": self.suite.model_dump(mode="json"), "model": self.model, "backend": self.backend,
                 "args": self.identity_args()}
        if self.generation.identity():  # a default protocol hashes as before: older runs keep their ids
            ident["generation"] = self.generation.identity()
        if versions := suite_task_versions(self.suite):  # tasks at version 0 hash as before
            ident["task_versions"] = versions
        prefix = f"{slug(self.label or Path(self.model).name or self.model)}-{slug(self.suite.name)}"
        legacy = f"{prefix}-{_digest(ident)}"
        new = legacy if not self.label or slug(self.label) == self.label else f"{prefix}-{_digest({**ident, 'label': self.label})}"
        if (Path(self.out_dir) / new).exists():
            return new
        if new != legacy and _record_label(Path(self.out_dir) / legacy) == self.label:
            return legacy  # scored before labels were hashed: resumed, not started again
        return _older_run(self, prefix) or new

    def secrets(self) -> list[str]:
        """URL passwords and tokens in the backend arguments: redacted wherever the record holds them."""
        return [s for v in self.backend_args.values() if isinstance(v, str) for s in url_secrets(v)]

    def in_shard(self, sample_id: str) -> bool:
        i, n = self.shard
        return n == 1 or int(hashlib.sha1(sample_id.encode()).hexdigest(), 16) % n == i


def _digest(ident: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:8]


def _record_label(run_dir: Path) -> str | None:
    """The label a stored run's record names (None: no readable record)."""
    try:
        return json.loads((run_dir / "record.json").read_text(encoding="utf-8")).get("label")
    except (OSError, ValueError, AttributeError):
        return None


def _older_run(plan: RunPlan, prefix: str) -> str | None:
    """A schema-2 run of the same suite, model, backend and identity arguments, if the store holds one."""
    suite = plan.suite.model_dump(mode="json")
    for path in sorted(Path(plan.out_dir).glob("*/record.json")):
        name = path.parent.name
        if name[: -9] != prefix or not RunStore(plan.out_dir, name).has_rows():
            continue
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        old_args = rec.get("backend_args") or {}
        if (rec.get("schema_version", 0) < 3 and rec.get("model") == plan.model and rec.get("suite_config") == suite
                and rec.get("backend") in (plan.backend, plan.backend.split(":", 1)[0])
                and all(old_args.get(k, v) == v for k, v in plan.identity_args().items())):
            return name
    return None


@dataclass(frozen=True)
class Cell:
    """One task at one length: the unit of generation, batching and progress."""

    task: Task
    length: int
    planned: int  # samples of the whole run (all shards)
    indices: tuple[int, ...]  # this shard's
    repeats: int = 1  # generations per sample (--repeats): each is a row

    def ids(self) -> list[str]:
        return [repeat_id(f"{self.task.name}@{self.length}#{j}", r) for j in self.indices for r in range(self.repeats)]


@dataclass(frozen=True)
class Prepared:
    """A checked plan: what to score, the store it goes to (not yet opened), and the model's light view."""

    plan: RunPlan
    model: Any  # the backend, or a view with the tokenizer and context length whose build() loads the weights
    renderer: PromptRenderer
    ctx: GenContext
    cells: list[Cell]
    external: list[Any]
    store: RunStore
    identity: dict[str, Any]  # the record's identity fields, checked against an existing record
    estimate: Estimate
    done: frozenset[str]
    complete: bool  # every planned sample is stored: nothing to score, nothing to load
    judge: JudgeCost = JudgeCost(0, 0)  # paid judge calls of the samples still to score (harness/run/judge_budget.py)
    cost: Any = None  # the tokens and money of the samples to score, and the run's meter (harness/run/cost_guard.py)

    @property
    def planned(self) -> int:
        return sum(len(c.indices) * c.repeats for c in self.cells)


def prepare(plan: RunPlan, *, fresh: bool = False, backend: Any = None, judge_budget: JudgeBudget | None = None,
            prices: Any = None, ceiling: Any = None) -> Prepared:
    """Every check of the plan, in order of cost; nothing is written (not even the sample cache). A run with paid
    judge calls needs a `judge_budget` that covers them (--judge-budget); `ceiling` (--max-cost, --max-tokens) must
    cover the plan's estimate under `prices` (harness/run/cost_guard.py)."""
    suite = plan.suite
    check_size(suite, batch_size=int(plan.backend_args.get("batch_size") or 1))  # lengths over the bound: named first
    check_counts(suite, repeats=plan.generation.repeats, store_dir=plan.out_dir)  # arithmetic: before anything grows
    check_zero_lengths(suite)  # from the suite alone: before a model is converted or loaded
    check_alias_context(plan, suite)  # an alias's context is known without converting its GGUF
    model = backend if backend is not None else open_model(plan, suite.truncation)
    plan = resolve_auto(plan, model)  # a resolved `auto` (dtype) is identity: the run id hashes what will run
    gen = plan.generation
    renderer = PromptRenderer(model.tokenizer, suite.template, system=gen.system_prompt, thinking=gen.thinking)
    plan = plan.resolved(renderer.thinking)
    ctx = GenContext(model.tokenizer, renderer, data_dir=plan.data_dir, verify=resolve_mode(suite.verify, suite.samples))
    cells, external = plan_cells(suite, ctx, keep=plan.in_shard, repeats=gen.repeats, cap=plan.sample_cap)
    check_lengths(cells, model, suite.truncation, thinking=plan.generation.thinking_budget)
    size = estimate(((c.length, len(c.indices)) for c in cells), max(1, int(getattr(model, "batch_size", 1) or 1)))
    size.check_memory()
    for task in {c.task.name: c.task for c in cells}.values():
        require(model, task.needs, why=f"task {task.name}")
    identity = {"model": plan.model, "backend": getattr(model, "name", plan.backend),
                "identity_args": redact_all(plan.identity_args(), plan.secrets()),  # as the record stores them
                "tokenizer_fingerprint": tokenizer_fingerprint(model.tokenizer), "template": renderer.template,
                "model_fingerprint": model_fingerprint(model, plan.model), "seed": suite.seed,
                "truncation": suite.truncation, "suite_config": suite.model_dump(mode="json"),
                "generation": plan.generation.identity()}
    i, n = plan.shard
    store = RunStore(plan.out_dir, plan.run_id(), part=None if n == 1 else f"shard-{i}-of-{n}")
    done: frozenset[str] = frozenset()
    if store.record_path.exists():
        store.read_record()  # a garbage record is one line, before anything is written
        if not fresh:
            check_identity(store, identity)
            done = frozenset(store.done_ids())
    complete = bool(done) and all(j in done for c in cells for j in c.ids()) and (
        i != 0 or all(t.is_complete(store.dir) for t in external))
    judge = judge_cost(cells, done)
    check_budget(judge, judge_budget)
    cost = plan_cost(name=board_name("", identity["backend"], plan.model), prices=prices, ceiling=ceiling, cells=cells,
                     done=done, store=store, fresh=fresh, thinking_budget=plan.generation.thinking_budget,
                     sequential=plan.until is not None)
    if not complete:
        _check_tasks(cells, ctx, suite.seed, done)
    return Prepared(plan, model, renderer, ctx, cells, external, store, identity, size, done, complete, judge, cost)


def _check_tasks(cells: list[Cell], ctx: GenContext, seed: int, done: frozenset[str]) -> None:
    """Bad task data, and a length too short for a task: the first pending sample of each task's shortest cell
    (a longer length fits if a shorter one does), built without the sample cache."""
    pending = [(c, [j for j in c.indices if any(repeat_id(f"{c.task.name}@{c.length}#{j}", r) not in done
                                                 for r in range(c.repeats))]) for c in cells]
    pending = [(c, todo) for c, todo in pending if todo]
    for task in {id(c.task): c.task for c, _ in pending}.values():
        task.prepare(ctx)
    shortest: dict[str, tuple[Cell, list[int]]] = {}
    for c, todo in pending:
        if c.task.name not in shortest or c.length < shortest[c.task.name][0].length:
            shortest[c.task.name] = (c, todo)
    for c, todo in shortest.values():
        next(datasets.iter_samples(c.task, length=c.length, indices=todo[:1], seed=seed, ctx=ctx, use_cache=False))


def open_model(plan: RunPlan, truncation: str) -> Any:
    """The backend's light view (tokenizer and context, no weights) where it has one, else the backend itself."""
    from ctxbench.harness.backends.args import check_backend_args

    check_backend_args(plan.backend, plan.backend_args)  # the one check of backend args (score's CLI ran it too)
    factory = registry.get("backend", plan.backend, field="backend")
    light = getattr(factory, "plan", None)
    if light is not None:
        return light(model=plan.model, truncation=truncation, **plan.backend_args)
    return Built(factory(model=plan.model, truncation=truncation, **plan.backend_args))


class Built:
    """A backend that was built to plan with (it has no light view): build() returns it."""

    def __init__(self, backend: Any):
        self.backend = backend

    def build(self) -> Any:
        return self.backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def model_fingerprint(backend: Any, model: str) -> str:
    """The backend's own fingerprint if it has one, else a hash of the local weights, else the model's name; filed
    under a model-free backend's name (`echo:...`, types.run_fingerprint) whether or not its fingerprint() says so,
    as the store's resume check and the board read it."""
    own = getattr(backend, "fingerprint", None)
    if callable(own):
        found = str(own())
    else:
        try:
            found = weights_fingerprint(model)
        except (ConfigError, OSError):
            found = "name:" + model
    return run_fingerprint(str(getattr(backend, "name", "") or ""), found)


def plan_cells(suite: Suite, ctx: GenContext, keep=lambda sample_id: True, repeats: int = 1,
               cap: int | None = None) -> tuple[list[Cell], list[Task]]:
    """The suite's (task, length) cells and its external tasks, without generating any sample. A task with its own
    count (a grid, fixed items) scores that many; `cap` (--samples on the command line) keeps a real-data task's
    first `cap` records in the dataset's order (LongBench, InfiniteBench, judge/qa over them), where it was ignored.
    A grid keeps its whole grid: its arguments set its count, and a prefix would drop its deepest positions."""
    cells, external = [], []
    for i, spec in enumerate(suite.tasks):
        task = build_task(spec, where=f"tasks.{i}")
        if task.external:
            external.append(task)
            continue
        n = task.samples_per_length(ctx)
        n = suite.samples if n is None else n if cap is None or not reads_records(task) else min(n, cap)
        check_zero_lengths(suite, only=i, task=task)
        for length in spec.lengths or suite.lengths:
            binned = task.samples_at(length, ctx)  # fixed items binned by length
            at = n if binned is None else min(n, binned)
            cells.append(Cell(task, length, at, tuple(j for j in range(at) if keep(f"{task.name}@{length}#{j}")), repeats))
    return cells, external


def check_zero_lengths(suite: Suite, *, only: int | None = None, task: Task | None = None) -> None:
    """Length 0 is for external (lm-eval) tasks only: refused from the suite alone, before any model work."""
    for i, spec in enumerate(suite.tasks):
        if (only is not None and i != only) or 0 not in (spec.lengths or suite.lengths):
            continue
        if not (task if only is not None and task is not None else build_task(spec, where=f"tasks.{i}")).external:
            raise ConfigError(f"tasks.{i}: {spec.display} needs a length of at least 64 tokens; length 0 is for "
                              "short-context (lm-eval) tasks only")


CONTEXT_ARGS = ("max_context", "rope_scaling", "max_model_len", "context_length")  # arguments that change a context


def check_alias_context(plan: RunPlan, suite: Suite) -> None:
    """Lengths over a shipped alias's context on hf (its config's max_position_embeddings, recorded in
    core/models.ALIASES), refused before its GGUF is converted; the full check (thinking, truncation) follows later."""
    from ctxbench.harness.core.models import ALIASES

    alias = ALIASES.get(plan.model)
    if alias is None or plan.backend != "hf" or suite.truncation != "refuse" or any(plan.backend_args.get(k) for k in CONTEXT_ARGS):
        return
    over = sorted({length for spec in suite.tasks for length in (spec.lengths or suite.lengths) if length > alias.context})
    if over:
        raise PromptTooLongError(f"lengths: {', '.join(map(str, over))} exceed the model's context of {alias.context} "
                                 "tokens; drop them (--lengths) or pass --truncation middle to cut prompts in the middle")


def reads_records(task: Task) -> bool:
    """A task whose samples are a dataset's records (tasks/realdata.py), or a judge over one: it says so itself."""
    return task.reads_records


def check_lengths(cells: list[Cell], backend: Any, truncation: str, *, thinking: int = 0) -> None:
    """Refuse lengths the model cannot hold (a sample fills its length, generation included); with truncation
    middle, over-long prompts are cut, but a task's generation must still fit the context.

    A thinking budget comes on top of a sample's length (prompt + answer budget), so the context must hold both;
    the prompts stay the size they are without thinking, which keeps lengths comparable between the two modes.
    A task whose prompt fills its length (task.past_length, RULER v2 as its official code ran) adds its answer budget."""
    context = backend.context_length
    past: dict[int, int] = {}
    for c in cells:
        past[c.length] = max(past.get(c.length, 0), c.task.past_length if c.task.needs == "generate" else 0)
    over = sorted({c.length for c in cells if c.length + past[c.length] + (thinking if c.task.needs == "generate" else 0) > context})
    if over and truncation == "refuse":
        budget = f" plus the thinking budget of {thinking}" if thinking else ""
        if any(past[n] for n in over):
            names = sorted({c.task.name for c in cells if c.length in over and c.task.past_length})
            who = names[0] if len(names) == 1 else f"{len(names)} tasks such as {names[0]}"
            budget += (f" plus up to {max(past[n] for n in over)} answer tokens generated past them ({who}: the prompt "
                       "fills the length, as the official code ran; prompt_fills_length: false in the suite keeps the "
                       "answer within it)")
        fix = "; lower --max-thinking-tokens," if thinking else ";"
        raise PromptTooLongError(
            f"lengths: {', '.join(map(str, over))}{budget} exceed the model's context of {context} tokens{fix} "
            "drop them (--lengths) or pass --truncation middle to cut prompts in the middle")
    for c in cells:
        generate = int(c.task.max_new_tokens or 0) if c.task.needs == "generate" else 0
        generate += thinking if c.task.needs == "generate" else 0
        if generate >= min(context, c.length + thinking + c.task.past_length):
            raise PromptTooLongError(f"{c.task.name}: generates up to {generate} tokens, which leaves no room for a "
                                     f"prompt at length {c.length} (context {context}); use larger lengths")
