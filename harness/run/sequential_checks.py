"""What a sequential run (`ctxbench score --until` / `--vs`) refuses before anything is written, each in one line.

A confidence sequence holds its α only where its assumptions hold: rounds independent of one another, one α for
the whole run, and (for --vs) pairs that are the same samples. Where they would not, the run is refused instead of
printing a verdict that does not hold (docs/sequential.md, "What it refuses").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbench.harness.core import datasets
from ctxbench.harness.core.adaptive_state import read_state
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.store import RunStore
from ctxbench.harness.run.sequential import check_pairs


def check_sequential(ready: Any, lengths: list[Any]) -> None:
    """Every refusal of a sequential run, in order of cost (the samples built last, without the sample cache)."""
    until = ready.plan.until
    check_alpha(ready.store.dir, until.alpha, resumed=bool(ready.done))
    latest = ready.store.latest() if ready.done else {}
    if until.vs:
        check_not_itself(until.vs, ready.store.dir)
        earlier = RunStore(Path(until.vs).parent, Path(until.vs).name)
        check_pairs(until, lengths, ready.plan.suite.seed)
        check_task_args(ready.plan.suite, earlier.read_record(), Path(until.vs).name)
    first = _first_samples(ready, lengths, latest)
    check_clusters(first)
    if until.vs:
        stored = [{"id": sid, "prompt_hash": r.get("prompt_hash")} for sid, r in latest.items() if r.get("prompt_hash")]
        check_prompts([*first.values(), *stored], earlier, ready.identity, Path(until.vs).name)


def check_alpha(run_dir: Path, alpha: float, *, resumed: bool) -> None:
    """A resume keeps the α its verdicts were computed at: a guarantee holds for one α fixed in advance, and a
    rerun at another α after seeing the verdicts would choose it from the data."""
    rule = read_state(run_dir).get("rule") or {}
    if resumed and rule.get("alpha") is not None and float(rule["alpha"]) != float(alpha):
        raise ConfigError(f"--alpha: this run's verdicts were computed at alpha {rule['alpha']:g} (adaptive.json) and "
                          f"a guarantee holds for one alpha; rerun with --alpha {rule['alpha']:g}, or start over with "
                          "--fresh")


def check_not_itself(vs: str, run_dir: Path) -> None:
    if Path(vs).resolve() == Path(run_dir).resolve():
        raise ConfigError(f"--vs: {Path(vs).name} is this run itself, so every difference is 0; name the earlier run of "
                          "the other model or checkpoint (runs/<its run id>)")


def _resolved_args(spec: dict[str, Any]) -> dict[str, Any]:
    from ctxbench.harness.core.config import TaskSpec, build_task

    return build_task(TaskSpec(**spec)).args.model_dump(mode="json")


def check_task_args(suite: Any, earlier: dict[str, Any], name: str) -> None:
    """Pairs are samples by id (task, length, index): the two runs must build them from the same task arguments
    (defaults resolved, so an argument spelled out equals its default) and the same truncation."""
    theirs = {t.get("name") or t.get("task"): t for t in (earlier.get("suite_config") or {}).get("tasks") or []}
    for spec in suite.tasks:
        other = theirs.get(spec.display)
        if other is None:
            continue  # no rows there: check_pairs names the lengths without a complete round
        mine, their = _resolved_args(spec.model_dump(mode="json")), _resolved_args(other)
        if other.get("task") != spec.task or mine != their:
            diff = sorted(k for k in set(mine) | set(their) if mine.get(k) != their.get(k)) or ["task"]
            raise ConfigError(f"--vs: {name} scored {spec.display} with other task arguments ({', '.join(diff)}), so "
                              "its samples are not this run's; compare runs of the same suite and task arguments")
    truncation = (earlier.get("suite_config") or {}).get("truncation")
    if truncation not in (None, suite.truncation):
        raise ConfigError(f"--vs: {name} was scored with truncation {truncation} and this run with {suite.truncation}; "
                          f"pass --truncation {truncation}")


def _first_samples(ready: Any, lengths: list[Any], latest: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Per task, its first sample at its shortest sequential length: the stored row if there is one, else the sample
    built without the cache (task data was checked by the plan step). Each as {id, cluster, prompt_hash}."""
    first: dict[str, Any] = {}
    for item in sorted(lengths, key=lambda x: x.length):
        for cell in item.cells:
            if cell.task.name not in first and cell.indices:
                first[cell.task.name] = cell
    out = {}
    for name, cell in first.items():
        sid = f"{name}@{cell.length}#{cell.indices[0]}"
        row = latest.get(sid)
        if row is None or row.get("prompt_hash") is None:
            cell.task.prepare(ready.ctx)
            sample = next(datasets.iter_samples(cell.task, length=cell.length, indices=cell.indices[:1],
                                                seed=ready.plan.suite.seed, ctx=ready.ctx, use_cache=False))
            row = {"cluster": sample.meta.get("cluster"), "prompt_hash": sample.prompt_hash}
        out[name] = {"id": sid, "cluster": row.get("cluster"), "prompt_hash": row.get("prompt_hash")}
    return out


def check_clusters(first: dict[str, dict[str, Any]]) -> None:
    """A task whose samples carry a cluster id (a depth grid's shared haystack, questions on one document, a set's
    shared demonstrations) has dependent rounds: one bet per round would not hold α (0.30-0.38 wrong verdicts at
    α = 0.05 on a depth grid, issue 31), so --until refuses it."""
    for name, sample in first.items():
        if sample["cluster"] is not None:
            raise ConfigError(cluster_refusal(name, f"cluster {sample['cluster']!r}"))


def cluster_refusal(name: str, which: str) -> str:
    """The one line a clustered task gets for --until: from `score` (naming its first sample's cluster) and from
    `plan` (naming what the task declares it shares, as a plan builds no sample)."""
    return (f"--until: {name}'s samples share a haystack, document or demonstrations ({which}), so its rounds are not "
            "independent and a sequential verdict would not hold its alpha; score it without --until (the board's "
            "interval allows for clusters), or leave it out (--tasks)")


def declared_cluster_refusal(suite: Any) -> str | None:
    """For `plan`: the refusal `score --until` gives this suite, where a task declares that its samples share a
    context (Task.shared_context; a plan builds no sample to read a cluster id from). None where none declares it."""
    from ctxbench.harness.core.config import build_task

    for i, spec in enumerate(suite.tasks):
        shared = build_task(spec, where=f"tasks.{i}").shared_context
        if shared:
            return cluster_refusal(spec.display, f"the questions on one {shared} are one cluster")
    return None


def check_prompts(samples: list[dict[str, Any]], earlier: RunStore, identity: dict[str, Any], name: str) -> None:
    """Where both runs render prompts alike (one tokenizer and template), a paired sample's prompt must be the same
    text: compared by hash on each task's first sample and on every sample this run has stored."""
    record = earlier.read_record()
    if (record.get("tokenizer_fingerprint"), record.get("template")) != (identity.get("tokenizer_fingerprint"),
                                                                         identity.get("template")):
        return  # other models' prompts differ by their templates; the task arguments were checked above
    theirs = earlier.latest()
    for sample in samples:
        row = theirs.get(sample["id"])
        if row and row.get("prompt_hash") and row["prompt_hash"] != sample["prompt_hash"]:
            raise ConfigError(f"--vs: {name}'s prompt for {sample['id']} differs from this run's (prompt hash "
                              f"{row['prompt_hash']} vs {sample['prompt_hash']}), so its samples are not this run's; "
                              "compare runs of the same suite, task arguments and data")
