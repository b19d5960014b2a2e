"""`ctxbench plan` prices the plan (issue 35 item 3): tokens and cost for the full protocol and for each --until
target, from the suite alone; a model without a price gets tokens only."""

from __future__ import annotations

import json

SUITE = "name: priced\nlengths: [1024, 2048]\nsamples: 50\ntasks: [ruler/niah_single_1]\n"
PRICES = """prices:
  - model: priced-model
    input: 2
    output: 8
    as_of: 2026-11-27
    source: https://example.invalid/test-prices
"""


def test_plan_gives_tokens_and_cost_for_the_full_protocol_and_until(tmp_path, ctxbench) -> None:
    (tmp_path / "s.yaml").write_text(SUITE)
    (tmp_path / "p.yaml").write_text(PRICES)
    args = ["plan", "--suite", str(tmp_path / "s.yaml"), "--scores", "1k=99,2k=10", "--prices", str(tmp_path / "p.yaml")]
    code, out, err = ctxbench(*args, "--model", "priced-model", "--json")
    assert code == 0, err
    tokens = json.loads(out)["tokens"]
    full, until = tokens["full"], tokens["targets"]["effective-length"]
    assert (full["prompt_tokens"], full["generated_tokens"]) == (50 * 1024 + 50 * 2048, 100 * 128)
    assert full["cost_usd"] == (full["prompt_tokens"] * 2 + full["generated_tokens"] * 8) / 1e6
    assert 0 < until["prompt_tokens"] < full["prompt_tokens"] and until["cost_usd"] < full["cost_usd"]
    code, out, err = ctxbench(*args, "--model", "priced-model")
    assert code == 0, err
    assert "tokens and cost for priced-model at $2 in, $8 out per 1M tokens (as of 2026-11-27" in out
    assert f"full protocol: ~153,600 prompt + at most 12,800 generated tokens; at most ${full['cost_usd']:,.4f}" in out
    assert f"--until effective-length (expected): ~{until['prompt_tokens']:,} prompt" in out
    code, out, err = ctxbench(*args, "--model", "unpriced")
    assert code == 0 and "tokens for unpriced (no price for it in the price table: tokens only):" in out
    assert "at most $" not in out
