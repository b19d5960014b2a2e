"""Journey: a run that knows its price (issue 35 items 2-3), against the OpenAI stand-in on loopback.

The stand-in reports usage as a caching reasoning API does: prompt tokens (more than the plan's length, as a server
counting its own template can), cached prompt tokens and reasoning tokens. The rows take the server's counts
(`token_source: server`), are priced by a tiny price table, and the board's "Tokens and cost" section shows them.
A `--max-cost` the estimate fits but real use exceeds stops the run after the batch in flight, resumable; the same
ceiling again is refused in one line (the ceiling is the whole run's); a higher one finishes, and the server is
never asked for a sample twice.
"""

from __future__ import annotations

import json
import threading

import pytest

from tests.json_server import json_server

pytestmark = pytest.mark.timeout(600)

SUITE = ("name: priced\nlengths: [256]\nsamples: 6\n"
         "tasks:\n  - task: niah/single\n    max_new_tokens: 8\n    args: {depths: 2, samples_per_cell: 3}\n")
PRICES = """prices:
  - model: smollm2-135m
    input: 1000
    cached_input: 100
    output: 2000
    as_of: 2026-11-27
    source: https://example.invalid/test-prices
"""
USAGE = {"prompt_tokens": 3000, "completion_tokens": 6, "prompt_tokens_details": {"cached_tokens": 600},
         "completion_tokens_details": {"reasoning_tokens": 3}}
ROW_COST = ((3000 - 600) * 1000 + 600 * 100 + 6 * 2000) / 1e6  # $2.472


def sample_lines(store) -> list[dict]:
    return [json.loads(line) for p in sorted(store.glob("*/samples*.jsonl")) for line in p.read_text().splitlines()]


class PricedServer:
    def __init__(self):
        self.sent: list[str] = []
        self.lock = threading.Lock()
        self.http, self.url = json_server(lambda: {"data": [{"id": "stub", "max_model_len": 8192}]}, self.answer)

    def answer(self, body: dict) -> dict:
        prompt = body.get("prompt") or body["messages"][-1]["content"]
        with self.lock:
            self.sent.append(prompt)
        choice = {"index": 0, "text": "The number is 1.", "message": {"role": "assistant", "content": "The number is 1."},
                  "finish_reason": "stop"}
        return {"choices": [choice], "usage": USAGE}

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def test_rows_carry_the_servers_tokens_and_price_and_a_ceiling_stops_and_resumes(data_dir, tmp_path, ctxbench):
    server = PricedServer()
    (tmp_path / "s.yaml").write_text(SUITE)
    (tmp_path / "prices.yaml").write_text(PRICES)
    store = tmp_path / "runs"
    argv = ["score", "--backend", "openai", "--model", "smollm2-135m", "--suite", str(tmp_path / "s.yaml"),
            "--store", str(store), "--data-dir", str(data_dir), "--prices", str(tmp_path / "prices.yaml"),
            "--backend-arg", f"base_url={server.url}", "--backend-arg", "served_model=stub",
            "--backend-arg", "concurrency=1", "--backend-arg", "batch_size=2", "--backend-arg", "context_length=8192"]
    try:
        # the estimate (6 x (256 + 8) tokens, $1.63) fits under $4; real use ($2.47 a row) reaches it in the first batch
        code, _, err = ctxbench(*argv, "--max-cost", "4")
        assert code == 130, err
        assert "tokens (samples to score): 6 samples, ~1,536 prompt + at most 48 generated; at most $1.6320" in err
        assert "--max-cost reached: $4.9440 of $4.0000" in err and "rerun" in err
        rows = sample_lines(store)
        assert len(rows) == 2 and len(server.sent) == 2
        for r in rows:
            assert (r["prompt_tokens"], r["cached_tokens"], r["generated_tokens"], r["reasoning_tokens"]) == (3000, 600, 6, 3)
            assert r["token_source"] == "server" and r["cost_usd"] == pytest.approx(ROW_COST)

        code, _, err = ctxbench(*argv, "--max-cost", "4")  # the whole run's ceiling: already spent
        assert code == 2 and err.strip().splitlines()[-1].startswith("error: --max-cost: the plan's estimate is $6.0320")
        assert len(server.sent) == 2 and len(sample_lines(store)) == 2

        code, _, err = ctxbench(*argv, "--max-cost", "100")
        assert code == 0, err
        ids = [r["id"] for r in sample_lines(store)]
        assert len(ids) == len(set(ids)) == 6 and len(server.sent) == len(set(server.sent)) == 6  # none paid twice

        code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"))
        assert code == 0, err
        board = (tmp_path / "board" / "leaderboard.md").read_text()
        line = next(x for x in board.splitlines() if x.startswith("| smollm2-135m |") and "18,000" in x)
        assert "3,600 (20%)" in line and "18 (50%)" in line and f"${6 * ROW_COST:,.4f}" in line.replace("\\$", "$")
    finally:
        server.close()
