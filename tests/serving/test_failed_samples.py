"""A server that fails every other request: the run says so and exits 3, the table and the board mark every failed
cell with its count, a rerun retries exactly the failures, and credentials in base_url reach no file (issue 10 §1).

Model-free and without wall-clock waits: a scripted OpenAI-style server behind the fault-injection proxy.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd

from ctxbench.harness.core import datasets
from ctxbench.harness.core.config import TaskSpec, build_task
from ctxbench.harness.core.context import GenContext
from ctxbench.harness.core.prompting import PromptRenderer

SUITE = "name: flaky\nlengths: [256, 320]\nsamples: 4\ntasks:\n  - task: niah/single\n    args: {depths: 2, samples_per_cell: 2}\n"


def doomed(prompt: str) -> bool:
    return int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 2 == 0


def test_failed_samples_exit_3_are_marked_and_retried(stub_server, fault_proxy, smol_tokenizer, data_dir, tmp_path,
                                                      ctxbench):
    stub = stub_server()
    proxy = fault_proxy(stub.url, [])
    proxy.doom_where(lambda body: doomed(body.get("prompt", "")), 503)
    suite = tmp_path / "flaky.yaml"
    suite.write_text(SUITE)
    store = tmp_path / "runs"
    base_url = proxy.url.replace("http://", "http://alice:pw-s3cret@")
    argv = ["score", "--backend", "openai", "--model", "smollm2-135m", "--suite", str(suite), "--store", str(store),
            "--data-dir", str(data_dir), "--backend-arg", f"base_url={base_url}", "--backend-arg", "served_model=stub",
            "--backend-arg", "max_retries=1", "--backend-arg", "backoff=0", "--backend-arg", "context_length=8192"]

    # the samples the run will send (same task, tokenizer, seed), and which of them the server fails
    task = build_task(TaskSpec(task="niah/single", args={"depths": 2, "samples_per_cell": 2}))
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir)
    fails = {length: sum(doomed(s.prompt) for s in datasets.generate(task, length=length, indices=range(4), seed=42, ctx=ctx))
             for length in (256, 320)}
    total = sum(fails.values())
    assert 0 < total < 8  # both kinds of sample, or the test proves nothing

    code, out, err = ctxbench(*argv)
    assert code == 3, err
    assert f"{total} samples failed (HTTP 503: {total}); rerun the same command to retry them" in err
    assert "failed" in out and "next: ctxbench board build" not in out  # the table marks them; no board suggested

    code, _, err = ctxbench("board", "build", "--store", str(store), "--out", str(tmp_path / "board"))
    assert code == 0, err
    csv = pd.read_csv(tmp_path / "board" / "results.csv")
    cells = csv[csv["task"] == "niah/single"].set_index("length")
    for length, k in fails.items():
        assert (cells.loc[length, "errored"], cells.loc[length, "n"], cells.loc[length, "planned"]) == (k, 4 - k, 4)
        assert cells.loc[length, "status"] == ("errored" if k else "complete")
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    assert f"! {max(fails.values())} failed" in md and "failed samples are not in the score" in md

    proxy.clear_doom()
    code, out, err = ctxbench(*argv)
    assert code == 0, err
    assert "next: ctxbench board build --store" in out
    (samples,) = store.glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 8 + total  # append-only: exactly the failures were redone
    for path in (samples, next(store.glob("*/record.json"))):
        assert "pw-s3cret" not in path.read_text()
    record = json.loads(next(store.glob("*/record.json")).read_text())
    assert record["backend_args"]["base_url"].startswith("http://***@") and "pw-s3cret" not in json.dumps(record["command"])
