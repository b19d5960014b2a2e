"""Tokens and money per run (issue 35 items 2-3), in process with the echo backend and a tiny price table: the price
table's refusals, the plan's estimate, a ceiling refused before anything is written, a ceiling reached mid-run that
stops resumably, and a rerun with a higher ceiling that finishes without scoring a sample twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.harness.core.config import Suite
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.prices import load_prices
from ctxbench.harness.run.cost_guard import Ceiling, CeilingReached, parse_ceiling
from ctxbench.harness.run.planning import RunPlan
from ctxbench.harness.run.runner import RunInterrupted, run

SUITE = Suite(name="cost", lengths=[512], samples=6, tasks=["ruler/niah_single_1"])
TABLE = """prices:
  - model: echo(*)
    input: 1000
    cached_input: 100
    output: 2000
    as_of: 2026-11-27
    source: https://example.invalid/test-prices
"""


def table(tmp_path: Path, text: str = TABLE):
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    return load_prices(path)


def plan(tmp_path: Path) -> RunPlan:
    return RunPlan(suite=SUITE, model="smollm2-135m", backend="echo", backend_args={"batch_size": 2},
                   out_dir=tmp_path / "runs")


def stored(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for p in (tmp_path / "runs").glob("*/samples*.jsonl") for line in p.read_text().splitlines()]


def test_the_price_table_is_dated_and_its_errors_name_the_key(tmp_path) -> None:
    prices = table(tmp_path)
    assert prices.price_for("echo(smollm2-135m)").output == 2000 and prices.price_for("smollm2-135m") is None
    assert prices.price_for("echo(x)").cost(1000, 400, 10) == pytest.approx((600 * 1000 + 400 * 100 + 10 * 2000) / 1e6)
    with pytest.raises(ConfigError, match=r"prices.yaml: prices.0.as_of: required key is missing"):
        table(tmp_path, TABLE.replace("    as_of: 2026-11-27\n", ""))
    with pytest.raises(ConfigError, match=r"prices.0.source: must be the URL"):
        table(tmp_path, TABLE.replace("https://example.invalid/test-prices", "my notes"))
    with pytest.raises(ConfigError, match=r"prices.0.output: required key is missing"):
        table(tmp_path, TABLE.replace("output:", "outptu:"))
    shipped = load_prices()  # the shipped examples: every entry dated, with a source
    assert shipped.prices and all(p.as_of and p.source.startswith("https://") for p in shipped.prices)


def test_ceiling_flags_are_checked_in_one_line() -> None:
    assert parse_ceiling(1.5, "2M") == Ceiling(1.5, 2 * 1024 * 1024)
    with pytest.raises(ConfigError, match="--max-cost: a non-negative amount"):
        parse_ceiling(-1.0, None)
    with pytest.raises(ConfigError, match="--max-tokens: a number of tokens"):
        parse_ceiling(None, "lots")


def test_rows_are_priced_and_the_estimate_bounds_them(tmp_path) -> None:
    outcome = run(plan(tmp_path), prices=table(tmp_path))
    rows = stored(tmp_path)
    assert outcome.done == 6 and len(rows) == 6
    for r in rows:
        assert r["token_source"] == "counted" and r["generated_tokens"] > 0
        assert r["cost_usd"] == pytest.approx((r["prompt_tokens"] * 1000 + r["generated_tokens"] * 2000) / 1e6)
    # the plan's estimate is an upper bound: every prompt at its length, every answer at its budget
    assert sum(r["cost_usd"] for r in rows) <= 6 * (512 * 1000 + 128 * 2000) / 1e6


def test_without_a_price_rows_cost_none_and_max_cost_is_refused(tmp_path) -> None:
    run(plan(tmp_path), prices=table(tmp_path, "prices: []\n"))
    assert {r["cost_usd"] for r in stored(tmp_path)} == {None}
    with pytest.raises(ConfigError, match=r"^--max-cost: no price for echo\(smollm2-135m\) in .*prices.yaml; add it or use "
                                         r"--max-tokens$"):
        run(plan(tmp_path), prices=table(tmp_path, "prices: []\n"), ceiling=Ceiling(max_cost=5.0), fresh=True)


def test_a_ceiling_under_the_estimate_is_refused_before_anything_is_written(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^--max-cost: the plan's estimate is \$4\.6080 .* > \$1\.0000; raise --max-cost"):
        run(plan(tmp_path), prices=table(tmp_path), ceiling=Ceiling(max_cost=1.0))
    with pytest.raises(ConfigError, match=r"^--max-tokens: the plan's estimate is 3,840 tokens .* > 1,000; raise"):
        run(plan(tmp_path), prices=table(tmp_path), ceiling=Ceiling(max_tokens=1000))
    assert not (tmp_path / "runs").exists()


def test_a_ceiling_reached_mid_run_stops_resumably_and_a_higher_one_finishes(tmp_path, monkeypatch) -> None:
    """The whole run's spending counts (the stored rows too): reached after the second batch, the run stops before the
    third; rerun with a higher ceiling, it scores only the rest. The estimate bounds real use, so a mid-run stop needs
    real use above it: here a server-like backend reports twice the planned prompt tokens."""
    from ctxbench.harness.backends.echo import EchoBackend

    real = EchoBackend.generate

    def padded(self, requests):  # prompt tokens as a server could count them: more than the plan's length
        import dataclasses

        return [dataclasses.replace(p, prompt_tokens=4 * 512) for p in real(self, requests)]

    monkeypatch.setattr(EchoBackend, "generate", padded)
    prices = table(tmp_path)
    with pytest.raises(RunInterrupted) as stop:
        run(plan(tmp_path), prices=prices, ceiling=Ceiling(max_cost=5.0))
    assert isinstance(stop.value.__context__, CeilingReached) and stop.value.outcome.done == 4
    assert len(stored(tmp_path)) == 4  # ~$4.2 a batch of two: the second batch reached $5, the third never ran
    with pytest.raises(ConfigError, match=r"--max-cost: the plan's estimate is .*\(\$\d+\.\d+ spent"):
        run(plan(tmp_path), prices=prices, ceiling=Ceiling(max_cost=5.0))  # the same ceiling: spent already
    outcome = run(plan(tmp_path), prices=prices, ceiling=Ceiling(max_cost=100.0))
    ids = [r["id"] for r in stored(tmp_path)]
    assert outcome.done == 6 and len(ids) == len(set(ids)) == 6


def test_with_until_only_what_is_spent_refuses(tmp_path) -> None:
    """--until may stop long before its full protocol: its estimate is a bound, so only the stored rows' spending is
    held against the ceiling up front (the mid-run ceiling does the rest)."""
    from ctxbench.harness.run.cost_guard import Spend, TokenEstimate, check_ceiling

    prices = table(tmp_path)
    price = prices.price_for("echo(m)")
    big = TokenEstimate(samples=100, input_tokens=100_000, output_tokens=10_000)
    check_ceiling("echo(m)", prices, Ceiling(max_cost=1.0), big, Spend("echo(m)", price, Ceiling(max_cost=1.0)), sequential=True)
    with pytest.raises(ConfigError, match=r"^--max-cost: the plan's estimate is \$120\.0000"):
        check_ceiling("echo(m)", prices, Ceiling(max_cost=1.0), big, Spend("echo(m)", price, Ceiling(max_cost=1.0)))
    spent = Spend("echo(m)", price, Ceiling(max_cost=1.0))
    spent.add([{"prompt_tokens": 2000, "generated_tokens": 0}])
    with pytest.raises(ConfigError, match=r"^--max-cost: the run has spent \$2\.0000 > \$1\.0000; raise --max-cost"):
        check_ceiling("echo(m)", prices, Ceiling(max_cost=1.0), big, spent, sequential=True)
