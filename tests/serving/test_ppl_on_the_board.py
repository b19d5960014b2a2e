"""A run that mixes a perplexity task (ppl/*: metric "perplexity", score None) with a scored task: the perplexity
rows never count as failed or pending, in `score`'s exit code, its table, the board's cells or its provenance; a
failure of the scored task still does (issue 10 §1 after the studies merge).

Model-free and without wall-clock waits: a scripted OpenAI-style server (prompt log-probabilities included) behind
the fault-injection proxy.
"""

from __future__ import annotations

import json

import pandas as pd


def _suite(tmp_path, text: str):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Document {i}. " + text * 60}) + "\n" for i in range(2)))
    suite = tmp_path / "mixed.yaml"
    suite.write_text("name: mixed\nlengths: [256]\nsamples: 2\ntasks:\n  - ruler/niah_single_1\n"
                     f"  - task: ppl/full\n    args: {{source: jsonl, path: {json.dumps(str(docs))}, min_tokens: 256}}\n")
    return suite


def _argv(url: str, suite, store, data_dir) -> list[str]:
    return ["score", "--backend", "openai", "--model", "smollm2-135m", "--suite", str(suite), "--store", str(store),
            "--data-dir", str(data_dir), "--backend-arg", f"base_url={url}", "--backend-arg", "served_model=stub",
            "--backend-arg", "max_retries=1", "--backend-arg", "backoff=0", "--backend-arg", "context_length=4096"]


def doom_first(proxy, selects) -> None:
    """Answer 503 to every attempt of the first request that `selects` accepts (one sample fails for good); a
    generation is selected by its max_tokens, a perplexity window by echo (a /tokenize call has neither)."""
    first: list[str] = []

    def doomed(body: dict) -> bool:
        if not selects(body):
            return False
        key = json.dumps(body.get("prompt", body.get("messages")))
        first[:] = first or [key]
        return key == first[0]

    proxy.doom_where(doomed, 503)


def _board(ctxbench, store, out):
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(out))
    assert code == 0, err
    return pd.read_csv(out / "results.csv"), (out / "leaderboard.md").read_text(), err


def test_perplexity_rows_are_neither_failed_nor_pending(stub_server, fault_proxy, data_dir, tmp_path, ctxbench):
    stub = stub_server(reply=" nothing")
    suite = _suite(tmp_path, "The quick brown fox jumps over the lazy dog. ")
    store = tmp_path / "runs"

    code, out, err = ctxbench(*_argv(stub.url, suite, store, data_dir))
    assert code == 0, err
    assert "failed" not in err and "next: ctxbench board build" in out
    assert "ppl/full (perplexity)" in out and "not run" not in out
    (run_dir,) = store.iterdir()
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    ppl = [r for r in rows if r["task"] == "ppl/full"]
    assert len(ppl) == 2 and all(r["score"] is None and r["error"] is None for r in ppl)  # what the board must skip

    csv, md, notes = _board(ctxbench, store, tmp_path / "board")
    assert set(csv["task"]) == {"ruler/niah_single_1", "avg"}  # no perplexity cell, so none pending or failed
    cell = csv[csv["task"] == "ruler/niah_single_1"].iloc[0]
    assert (cell["n"], cell["planned"], cell["errored"], cell["pending"], cell["status"]) == (2, 2, 0, 0, "complete")
    provenance = next(line for line in md.splitlines() if line.startswith(f"| {run_dir.name} "))
    assert "| 2/2 | 0 |" in provenance  # scored/planned and failed count the board's tasks only
    assert "ppl/full (perplexity) is not on the board" in notes


def test_a_failed_scored_task_still_fails_the_run_beside_perplexity(stub_server, fault_proxy, data_dir, tmp_path, ctxbench):
    stub = stub_server(reply=" nothing")
    proxy = fault_proxy(stub.url, [])
    doom_first(proxy, lambda body: not body.get("echo") and ("max_tokens" in body or "max_completion_tokens" in body))
    suite = _suite(tmp_path, "Pack my box with five dozen liquor jugs. ")
    store = tmp_path / "runs"

    code, out, err = ctxbench(*_argv(proxy.url, suite, store, data_dir))
    assert code == 3, err
    assert "1 samples failed (HTTP 503: 1); rerun the same command to retry them" in err  # the ruler sample only
    csv, md, _ = _board(ctxbench, store, tmp_path / "board")
    cell = csv[csv["task"] == "ruler/niah_single_1"].iloc[0]
    assert (cell["n"], cell["planned"], cell["errored"], cell["status"]) == (1, 2, 1, "errored")
    assert "ppl/full" not in set(csv["task"])


def test_a_board_of_perplexity_runs_only_says_why_it_is_empty(stub_server, data_dir, tmp_path, ctxbench):
    stub = stub_server()
    suite = _suite(tmp_path, "Sphinx of black quartz, judge my vow. ")
    suite.write_text(suite.read_text().replace("  - ruler/niah_single_1\n", ""))
    store = tmp_path / "runs"
    code, _, err = ctxbench(*_argv(stub.url, suite, store, data_dir))
    assert code == 0, err
    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"))
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "only perplexity tasks" in lines[0], err
    assert not (tmp_path / "board").exists()


def test_a_failed_perplexity_document_is_marked_in_the_terminal_table(stub_server, fault_proxy, data_dir, tmp_path,
                                                                       ctxbench):
    """The perplexity row says it covers fewer documents than planned, and the rerun fills the cell."""
    stub = stub_server(reply=" nothing")
    proxy = fault_proxy(stub.url, [])
    doom_first(proxy, lambda body: bool(body.get("echo")))  # the first perplexity window, every attempt
    suite = _suite(tmp_path, "How vexingly quick daft zebras jump. ")
    store = tmp_path / "runs"

    code, out, err = ctxbench(*_argv(proxy.url, suite, store, data_dir))
    assert code == 3, err
    row = next(line for line in out.splitlines() if "ppl/full (perplexity)" in line)
    assert "! (1/2, 1 failed)" in row, out  # one of the two documents scored, one failed
    assert "scored documents only" in out

    code, out, err = ctxbench(*_argv(stub.url, suite, store, data_dir))  # the server is healthy again: retried
    assert code == 0, err
    row = next(line for line in out.splitlines() if "ppl/full (perplexity)" in line)
    assert "!" not in row and "failed" not in row
