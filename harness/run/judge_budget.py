"""The cost guard of paid judge calls (tasks/judge/task.py): what a run will spend, said before it starts, and refused
over `--judge-budget`.

A task that pays per sample declares `paid_calls`: (calls, tokens at most) per scored sample. The plan step counts
the samples still to score (a resume counts only the pending ones; cached verdicts cost nothing but are counted,
since which are cached is known only once the answers are) and refuses, in one line and before anything is
written, a run that has judge calls and no `--judge-budget`, or more calls or tokens than the budget allows.

`--judge-budget` is a number of calls (`500`), or `calls=500`, `tokens=2M`, or both (`calls=500,tokens=2M`).

The estimate is an upper bound only if the servers behave; the budget is also held against real use: the plan step
hands every paid task one meter (tasks/judge/cache.py JudgeSpend) with the budget's limits, the tasks add the calls
and tokens the judge's server reports, and once real spending reaches a limit the run stops before the next paid
call, as an interrupt does (the rows so far kept, a rerun resumes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxbench.harness.core.errors import ConfigError


@dataclass(frozen=True)
class JudgeBudget:
    calls: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class JudgeCost:
    calls: int
    tokens: int
    tasks: tuple[Any, ...] = field(default=(), compare=False, repr=False)  # the paid tasks (their real-use meter)

    def line(self) -> str:
        return (f"judge: {self.calls} paid calls planned, at most ~{self.tokens:,} tokens (prompt and verdict; "
                "verdicts already cached cost nothing)")


def parse_budget(text: str | None) -> JudgeBudget | None:
    """`500`, `calls=500`, `tokens=2M` or `calls=500,tokens=2M`; None when not given."""
    if text is None:
        return None
    from ctxbench.harness.core.lengths import parse_length

    fields: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, _, value = part.rpartition("=")
        key = key.strip() or "calls"
        try:
            number = parse_length(value.strip())
        except (ValueError, ConfigError):
            number = -1
        if key not in ("calls", "tokens") or number < 0 or key in fields:
            raise ConfigError(f"--judge-budget: expected a number of calls (500) or calls=N,tokens=N (e.g. tokens=2M), "
                              f"got {text!r}")
        fields[key] = number
    if not fields:
        raise ConfigError("--judge-budget: give a number of calls (500) or calls=N,tokens=N")
    return JudgeBudget(**fields)


def judge_cost(cells: list[Any], done) -> JudgeCost:
    """The paid calls and tokens of the plan's samples still to score."""
    calls = tokens = 0
    tasks: dict[int, Any] = {}
    for c in cells:
        per = getattr(c.task, "paid_calls", None)
        if per:
            pending = sum(1 for j in c.ids() if j not in done)
            calls += pending * per[0]
            tokens += pending * per[1]
            tasks[id(c.task)] = c.task
    return JudgeCost(calls, tokens, tuple(tasks.values()))


def check_budget(cost: JudgeCost, budget: JudgeBudget | None) -> None:
    """Refuse a run whose judge calls are not allowed by the budget (nothing is written yet); else hold its paid
    tasks to the budget's limits by real use, with one meter for the whole run."""
    if not cost.calls:
        return
    if budget is None:
        raise ConfigError(f"--judge-budget: this run makes paid judge calls ({cost.calls} calls, ~{cost.tokens:,} tokens); "
                          f"pass --judge-budget {cost.calls} (or calls=N,tokens=N) to allow them")
    over = [f"{what} {planned:,} > {allowed:,}" for what, planned, allowed in
            (("calls", cost.calls, budget.calls), ("tokens", cost.tokens, budget.tokens)) if allowed is not None and planned > allowed]
    if over:
        raise ConfigError(f"--judge-budget: the run plans more than the budget ({'; '.join(over)}); raise the budget, or "
                          "score fewer samples (--samples, --lengths)")
    from ctxbench.tasks.judge.cache import JudgeSpend

    meter = JudgeSpend(calls_limit=budget.calls, tokens_limit=budget.tokens)
    for task in cost.tasks:
        task.spend = meter
