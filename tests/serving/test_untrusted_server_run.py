"""A whole `ctxbench score` against a server that cannot be trusted (issue 32, Medium 1 and the Low item on answers far
over max_tokens): one call in seven answers well-formed JSON of the wrong shape, one answers 100 KB for a budget of a
few tokens, one trickles its reply past `timeout` (Medium 2: it held an attempt for as long as it trickled). Before the schema, the first malformed reply was a traceback and exit 1 that lost the batch in flight, so
no rerun got past the first batch. Now each is its sample's error row, every batch is stored, the run exits 3 like
any run with failed samples, a rerun retries exactly those, and the long answer is stored cut and flagged (and the
board names the model whose server ignored the budget).

Model-free and without wall-clock waits: a scripted stand-in on loopback (tests/json_server.py's raw_server).
"""

from __future__ import annotations

import hashlib
import json

from tests.json_server import RawReply, raw_server

SUITE = ("name: untrusted\nlengths: [256]\nsamples: 14\n"
         "tasks:\n  - task: niah/single\n    max_new_tokens: 8\n    args: {depths: 2, samples_per_cell: 7}\n")
MALFORMED = [b'{"choices": ["oops"]}', b'{"choices": [{"text": "1"}], "usage": [1]}',
             b'{"choices": [{"text": "1"}], "usage": {"completion_tokens": Infinity}}', b'{"choices": [{"message": "1"}]}']


def kind(prompt: str) -> int:
    """0: a malformed reply, 1: an answer of 100 KB, 2: a reply trickled a byte at a time past the deadline (about 14 s,
    then the stand-in stops by itself), else a good one (a fixed function of the prompt)."""
    return int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 7


class Untrusted:
    def __init__(self):
        self.healed = False
        self.sent: list[str] = []
        self.http, self.url = raw_server(lambda: {"data": [{"id": "stub", "max_model_len": 8192}]}, self.answer)

    def answer(self, body: dict):
        prompt = body["prompt"]
        self.sent.append(prompt)
        if kind(prompt) == 0 and not self.healed:
            return RawReply(MALFORMED[len(self.sent) % len(MALFORMED)])
        if kind(prompt) == 2 and not self.healed:
            return RawReply(json.dumps({"choices": [{"text": "1"}]}).encode(), chunk=1, pause=0.5)
        text = "The number is 1. " * (6000 if kind(prompt) == 1 else 1)
        return {"choices": [{"index": 0, "text": text, "finish_reason": "stop"}]}


def test_a_server_of_malformed_and_overlong_replies_gives_error_rows_and_a_rerun_retries_them(
        data_dir, tmp_path, ctxbench):
    server = Untrusted()
    suite = tmp_path / "untrusted.yaml"
    suite.write_text(SUITE)
    store = tmp_path / "runs"
    argv = ["score", "--backend", "openai", "--model", "smollm2-135m", "--suite", str(suite), "--store", str(store),
            "--data-dir", str(data_dir), "--backend-arg", f"base_url={server.url}", "--backend-arg", "served_model=stub",
            "--backend-arg", "max_retries=0", "--backend-arg", "concurrency=1", "--backend-arg", "batch_size=2",
            "--backend-arg", "context_length=8192", "--backend-arg", "timeout=2"]
    try:
        code, out, err = ctxbench(*argv)
        bad = [p for p in server.sent if kind(p) == 0]
        long = [p for p in server.sent if kind(p) == 1]
        slow = [p for p in server.sent if kind(p) == 2]
        assert len(server.sent) == 14 and bad and long and slow  # every kind, or the test proves nothing
        assert code == 3, err
        assert f"{len(bad) + len(slow)} samples failed (" in err, err
        assert f"malformed completion response: {len(bad)}" in err
        assert f"timed out after 2s (the deadline for a whole answer): {len(slow)}" in err
        assert "rerun the same command to retry them" in err
        assert "Traceback" not in err
        (run,) = [p for p in store.iterdir() if p.is_dir()]
        rows = [json.loads(line) for f in sorted(run.glob("samples*.jsonl")) for line in f.read_text().splitlines()]
        assert len(rows) == 14  # every batch stored, the malformed replies as error rows
        errors = sorted(r["error"].split(": ", 1)[1].split(":")[0] for r in rows if r["error"])
        assert errors == sorted(["malformed completion response"] * len(bad) + [
            "timed out after 2s (the deadline for a whole answer)"] * len(slow))
        cut = [r for r in rows if r.get("over_budget")]
        assert len(cut) == len(long) and all(r["over_budget"] == 6000 * 17 for r in cut)
        assert all(r["generated_tokens"] <= 8 and r["score"] is not None for r in cut)

        code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"))
        assert code == 0, err
        md = (tmp_path / "board" / "leaderboard.md").read_text()
        assert f"Server ignored the answer budget: smollm2-135m ({len(long)} answer" in md

        server.healed, server.sent = True, []
        code, _, err = ctxbench(*argv)
        assert code == 0, err
        assert sorted(server.sent) == sorted(bad + slow)  # exactly the errored samples, and nothing else
    finally:
        server.http.shutdown()
        server.http.server_close()
