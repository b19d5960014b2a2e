"""A scoring run: prepare (every check), record, then the one scoring loop over its schedules (harness/run/: the
sequential rounds of --until, then every remaining sample at full N, then external tasks: harness/run/external.py).

Memory does not grow with the suite: samples are generated (or read from their cache) one chunk at a time,
sent, scored and appended before the next chunk is read; only the set of finished sample ids is kept
(harness/run/full.py).

Tasks driven by another harness (lm-eval) are "external": the same loop appends and counts the rows their harness
produces, through the same store, record and resume logic. Every check of the plan (harness/run/planning.py) runs before the store opens and before
the weights load; a finished rerun loads no weights. Every planned sample ends with a row: a prediction, or a
recorded error that a rerun of the same command retries. Each invocation is a session of the record, with its
execution settings and, when it ends (finished, failed or interrupted), its end time.

A task declares the backend capability it is scored with (`task.needs`); the run refuses a backend without it
before any work. Perplexity tasks need "prompt_logprobs": their samples carry token ids, sent as windows to
`backend.token_logprobs`, and their rows hold the summed negative log-likelihood, the token count and the
loss per position bucket instead of a prediction and a 0..1 score (score is None: boards skip them).

The record of a checkpoint ctxbench trained carries its training provenance (run id, config and data hashes,
trainer, base model), read from the ctxbench_manifest.json beside its weights.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from ctxbench.harness.core import registry
from ctxbench.harness.core.identity import backend_execution_args
from ctxbench.harness.core.provenance import plugins_used, versions
from ctxbench.harness.core.redact import redact_all
from ctxbench.harness.core.types import RunRecord
from ctxbench.harness.run.external import ExternalSchedule
from ctxbench.harness.run.full import FullSchedule
from ctxbench.harness.run.loop import RunInterrupted, RunOutcome, drive
from ctxbench.harness.run.planning import (  # noqa: F401 - Cell, plan_cells, model_fingerprint: re-exported
    Cell,
    Prepared,
    RunPlan,
    check_lengths,
    model_fingerprint,
    open_model,
    plan_cells,
    prepare,
)
from ctxbench.harness.run.sequential import SequentialSchedule, lengths_of
from ctxbench.harness.run.sequential_checks import check_sequential


def build_backend(plan: RunPlan, truncation: str) -> Any:
    """The plan's backend with its weights loaded (the plan step's view, built)."""
    return open_model(plan, truncation).build()


MANIFEST = "ctxbench_manifest.json"  # written beside the weights by ctxbench's trainers
PROVENANCE = ("run_id", "trainer", "label", "config_hash", "data_hash", "base_model", "base_model_gguf", "steps", "seed",
              "created", "data_summary")


def training_provenance(model: str) -> dict[str, Any]:
    """What trained this checkpoint, if ctxbench did: the manifest's identifying fields; {} for any other model."""
    path = Path(model) / MANIFEST
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"error": f"unreadable {MANIFEST}"}
    return {k: manifest.get(k) for k in PROVENANCE if k in manifest}


def run(plan: RunPlan, *, fresh: bool = False, console: Console | None = None, backend: Any = None,
        judge_budget: Any = None, prices: Any = None, ceiling: Any = None) -> RunOutcome:
    """Score the plan's suite into the store; rerunning resumes. `backend` overrides building one (tests, notebooks).

    Three steps: prepare (every check, nothing written, no weights), build the backend's weights (unless the run is
    already complete: then the store alone answers), score."""
    console = console or Console(stderr=True)
    ready = prepare(plan, fresh=fresh, backend=backend, judge_budget=judge_budget, prices=prices, ceiling=ceiling)
    if ready.judge.calls:  # the cost of a paid judge, said before the run (refused over --judge-budget by prepare)
        console.print(ready.judge.line(), highlight=False, style="dim")
    plan = ready.plan  # its thinking mode resolved
    if ready.complete:
        console.print(f"{ready.store.dir.name}: all {ready.planned} samples are scored already; the table is from the store",
                      highlight=False, style="dim")
        return RunOutcome(ready.store, planned=ready.planned, done=ready.planned)
    if plan.until is not None and _sequential_done(ready, console):
        return RunOutcome(ready.store, planned=ready.planned, done=len(ready.done))
    backend = ready.model.build() if backend is None else backend
    check_lengths(ready.cells, backend, plan.suite.truncation,  # a built backend may state a shorter context
                  thinking=plan.generation.thinking_budget)
    store, cells = ready.store, ready.cells
    with store.writer():
        if fresh:
            store.reset()
            if plan.shard[1] == 1:
                for path in [*store.dir.glob("lmeval_results.json"), *store.dir.glob("adaptive.json")]:
                    path.unlink()  # lm-eval's results and a sequential run's verdicts go with the rows
        record, session = _record(ready, backend)
        store.begin(record, session)
        console.print(ready.estimate.line(), highlight=False, style="dim")  # after the refusals: those stay one line
        console.print(ready.cost.line(), highlight=False, style="dim")  # tokens and money (harness/run/cost_guard.py)
        done = store.done_ids()
        outcome = RunOutcome(store, planned=ready.planned)
        outcome.done = sum(1 for c in cells for j in c.ids() if j in done)
        ended = "failed"
        try:
            if plan.until is not None:  # sequential: round by round until each length's verdict is settled
                rounds = SequentialSchedule(cells, done, backend, ready, store)
                drive(rounds, backend, ready, store, outcome, console)
                cells = rounds.rest()  # losses, and samples past a length's smallest N: scored at fixed N
            if cells:
                drive(FullSchedule(cells, done, backend, ready), backend, ready, store, outcome, console)
            external = ExternalSchedule(ready.external if plan.shard[0] == 0 else [], store.dir)  # first shard only
            if not external.done:
                drive(external, backend, ready, store, outcome, console)
            ended = "finished" if not outcome.failed else "failed"
        except KeyboardInterrupt:
            ended = "interrupted"
            outcome.interrupted = True
            raise RunInterrupted(outcome) from None
        finally:
            store.end_session(session, ended=_now(), outcome=ended)
    return outcome


def _sequential_done(ready: Prepared, console: Console) -> bool:
    """A sequential run whose every length has stopped under its rule needs no weights (checked before they load);
    what a sequential run cannot guarantee is refused first (harness/run/sequential_checks.py)."""
    lengths, rest = lengths_of(ready.cells, ready.store, ready.plan.until)
    check_sequential(ready, lengths)  # clusters, a changed --alpha, --vs's pairs: refused before anything is written
    if rest or not all(x.final for x in lengths):
        return False
    console.print(f"{ready.store.dir.name}: every length has stopped under --until {ready.plan.until.kind}; the table "
                  "is from the store (rerun without --until to extend it to N)", highlight=False, style="dim")
    return True


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _record(ready: Prepared, backend: Any) -> tuple[RunRecord, dict[str, Any]]:
    """The run's record (identity from the plan step) and this invocation's session entry (its execution settings)."""
    plan, cells, now = ready.plan, ready.cells, _now()
    secrets = plan.secrets()
    command = redact_all(sys.argv, secrets)  # no URL password or token reaches the record
    planned: dict[str, dict[str, int]] = {}
    for c in cells:
        planned.setdefault(c.task.name, {})[str(c.length)] = c.planned
    info = backend.info()
    ident = ready.identity
    record = RunRecord(
        run_id=ready.store.dir.name, created=now, suite=plan.suite.name, suite_config=ident["suite_config"], model=plan.model,
        backend=ident["backend"], backend_args=redact_all({**plan.backend_args, **info}, secrets),
        tokenizer=str(getattr(backend.tokenizer, "name_or_path", "")), tokenizer_fingerprint=ident["tokenizer_fingerprint"],
        template=ident["template"], seed=ident["seed"], truncation=ident["truncation"], versions=versions(), command=command,
        label=plan.label or plan.model, model_fingerprint=ident["model_fingerprint"],
        plan=planned, external=[t.name for t in ready.external], training=training_provenance(plan.model),
        losses=sorted({c.task.name for c in cells if c.task.needs == "prompt_logprobs"}),
        identity_args=ident["identity_args"], generation=ident["generation"], plugins=_plugins(plan, cells))
    i, n = plan.shard
    session = {"started": now, "shard": f"{i}/{n}", "command": command, "versions": record.versions,
               "host": platform.node(), "pid": os.getpid(), "execution": execution(plan, info, secrets),
               **({"plugins": record.plugins} if record.plugins else {})}
    return record, session


def _plugins(plan: RunPlan, cells) -> list[dict[str, str]]:
    """The plugins whose entries this run uses: its suite, tasks, their metrics and the backend."""
    used = [("suite", plan.suite.name), ("backend", plan.backend), *(("task", t.task) for t in plan.suite.tasks),
            *(("metric", c.task.metric) for c in cells)]
    return plugins_used(used)


def execution(plan: RunPlan, info: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    """This session's speed settings: the execution arguments given and the backend's resolved ones; a note where
    batch composition can change greedy outputs (bf16/fp16 on a GPU in batches, or a batching engine)."""
    speed = backend_execution_args(plan.backend)  # as the backend's Args declare them (core/identity.py)
    settings = {**plan.execution_args(),  # as given, then as the backend resolved them (batch_size 0 -> 16)
                **(plan.until.settings() if plan.until is not None else {}),  # a sequential run's rule (--until)
                **{k: v for k, v in info.items() if k in speed or k in ("batching", "dtype")}}
    batch = int(settings.get("batch_size") or 1)
    on_gpu = str(info.get("device", "")).startswith("cuda") and str(info.get("dtype", "")) in ("bfloat16", "float16")
    if (on_gpu and batch > 1) or registry.declared("backend", plan.backend, "batch_dependent", False):
        settings["batch_dependent"] = (f"greedy outputs can depend on which prompts share a batch here "
                                       f"({info.get('dtype', 'reduced precision')} on a GPU, batches of up to {batch}); "
                                       "a sample scored in another batch or session may differ")
    return redact_all(settings, secrets)
