"""`ctxbench plan`'s tokens and cost: the full protocol's and each `--until` target's, from the suite alone.

Each sample counts its length in prompt tokens and its task's answer budget in generated tokens, as `score`'s
estimate does (harness/run/cost_guard.py): an upper bound on what a model generates. A `--until` target's tokens are
its expected samples per length (sequential_plan's rows) at that length's tokens per sample; lengths without an
expected score count at the full protocol. Money needs a model and its price (`--model`, `--prices`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbench.harness.core.prices import Price


def length_tokens(suite: Any, data_dir: Path | None) -> dict[int, tuple[int, int, int]]:
    """Per length: (samples, prompt tokens, generated tokens at most) of the full protocol, as `score` plans it."""
    from ctxbench.harness.core.config import build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.run.planning import plan_cells

    out: dict[int, list[int]] = {}

    def add(length: int, samples: int, budget: int) -> None:
        s = out.setdefault(int(length), [0, 0, 0])
        s[0], s[1], s[2] = s[0] + samples, s[1] + samples * int(length), s[2] + samples * budget

    tasks = [build_task(spec, where=f"tasks.{i}") for i, spec in enumerate(suite.tasks)]
    generated = [spec for spec, t in zip(suite.tasks, tasks) if not getattr(t, "requires_data", False)]
    if generated:
        cells, _ = plan_cells(suite.model_copy(update={"tasks": generated}), GenContext(tokenizer=None, renderer=None,
                                                                                          data_dir=data_dir))
        for c in cells:
            add(c.length, c.planned, int(getattr(c.task, "max_new_tokens", 0) or 0))
    for spec, task in zip(suite.tasks, tasks):
        if getattr(task, "requires_data", False) and not task.external:
            for length in spec.lengths or suite.lengths:
                add(length, suite.samples, int(getattr(task, "max_new_tokens", 0) or 0))
    return {k: (v[0], v[1], v[2]) for k, v in sorted(out.items())}


def _priced(prompt: float, generated: float, price: Price | None) -> dict[str, Any]:
    cost = None if price is None else price.cost(round(prompt), 0, round(generated))
    return {"prompt_tokens": round(prompt), "generated_tokens": round(generated), "cost_usd": cost}


def token_plan(per_length: dict[int, tuple[int, int, int]], report: dict, model: str | None,
               price: Price | None) -> dict[str, Any]:
    """The plan's tokens (and cost, with a price) for the full protocol and each target with expected samples."""
    full = _priced(sum(v[1] for v in per_length.values()), sum(v[2] for v in per_length.values()), price)
    targets = {}
    for target in report.get("targets") or []:
        rows = [r for r in target["rows"] if r.get("length") is not None]
        if not rows or target.get("total_samples") is None:
            continue
        seen = {int(r["length"]) for r in rows}
        prompt = generated = 0.0
        for r in rows:
            samples, p, g = per_length.get(int(r["length"]), (0, 0, 0))
            if samples:
                prompt, generated = prompt + r["samples"] * p / samples, generated + r["samples"] * g / samples
        for length, (_, p, g) in per_length.items():  # lengths without an expected score: at the full protocol
            if length not in seen:
                prompt, generated = prompt + p, generated + g
        targets[target["target"]] = _priced(prompt, generated, price)
    return {"model": model, "price": None if price is None else price.model_dump(mode="json"), "full": full,
            "targets": targets}


def token_lines(plan: dict[str, Any]) -> list[str]:
    """The plan's tokens and cost as `ctxbench plan` prints them."""
    def one(d: dict[str, Any]) -> str:
        money = "" if d["cost_usd"] is None else f"; at most ${d['cost_usd']:,.4f}"
        return f"~{d['prompt_tokens']:,} prompt + at most {d['generated_tokens']:,} generated tokens{money}"

    price = plan.get("price")
    if price:
        head = (f"tokens and cost for {plan['model']} at ${price['input']:g} in, ${price['output']:g} out per 1M tokens "
                f"(as of {price['as_of']}, {price['source']}):")
    elif plan.get("model"):
        head = f"tokens for {plan['model']} (no price for it in the price table: tokens only):"
    else:
        head = "tokens (pass --model to price them):"
    lines = [head, f"  full protocol: {one(plan['full'])}"]
    lines += [f"  --until {name} (expected): {one(d)}" for name, d in plan["targets"].items()]
    return lines
