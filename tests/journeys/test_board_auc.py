"""Issue 34: `ctxbench board build` shows AUC@L beside effective length, and a run with thinking on and one with it
off (two generation identities of one model) as two separate rows, each with its own AUC. Two stored runs are
written as fixtures (record.json and samples as `ctxbench score` writes them), so the board is the only command (run
in process: `user_in_process`)."""

from __future__ import annotations

import csv
import dataclasses
import json

from ctxbench.harness.core.store import RunStore
from ctxbench.harness.core.types import RunRecord

LENGTHS = (1024, 2048, 4096)


def stored_run(root, run_id: str, *, generation: dict, p_by_length: dict[int, float], n: int = 10) -> None:
    """One scored run of smollm2-135m on ruler/vt, k of n correct at each length."""
    plan = {"ruler/vt": {str(L): n for L in LENGTHS}}
    rec = RunRecord(run_id=run_id, created="2026-01-01T00:00:00", suite="adhoc", suite_config={}, model="smollm2-135m",
                    backend="hf", backend_args={}, tokenizer="t", tokenizer_fingerprint="tok", template="chat",
                    seed=42, truncation="refuse", versions={"ctxbench": "0.1.0"}, command=["ctxbench"],
                    label="smollm2-135m", model_fingerprint="fp-smollm2", plan=plan, generation=generation,
                    sessions=[{"started": "2026-01-01"}])
    store = RunStore(root, run_id)
    store.dir.mkdir(parents=True, exist_ok=True)
    store.record_path.write_text(json.dumps(dataclasses.asdict(rec)))
    store.append([{"id": f"ruler/vt@{L}#{i}", "task": "ruler/vt", "length": L, "index": i,
                   "score": float(i < round(p * n)), "prompt_hash": f"{L}-{i}", "prediction": "", "answers": ["x"]}
                  for L, p in p_by_length.items() for i in range(n)])


def test_thinking_on_and_off_are_two_rows_each_with_its_auc(user_in_process):
    runs = user_in_process.cwd / "runs"
    stored_run(runs, "plain", generation={}, p_by_length={1024: 0.9, 2048: 0.6, 4096: 0.3})
    stored_run(runs, "thinks", generation={"thinking": "on", "max_thinking_tokens": 4096},
               p_by_length={1024: 1.0, 2048: 0.9, 4096: 0.8})
    r = user_in_process.run("ctxbench board build --store runs --out board --auc 2K,4K")
    assert r.code == 0, r.err
    md = (user_in_process.cwd / "board" / "leaderboard.md").read_text()
    main = md.split("## Main results", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in main.splitlines() if line.startswith("| Model"))
    assert "| Effective (CI lower) | AUC@2K | AUC@4K | 1K | 2K | 4K |" in header, header
    rows = [line for line in main.splitlines() if line.startswith("| smollm2-135m")]
    assert len(rows) == 2, main  # never merged into one model
    assert any(line.startswith("| smollm2-135m \\[thinking on, 4096\\] |") for line in rows), rows
    with open(user_in_process.cwd / "board" / "results.csv", newline="") as f:
        avg = {r["model"]: r for r in csv.DictReader(f) if r["task"] == "avg" and r["length"] == "1024"}
    assert set(avg) == {"smollm2-135m", "smollm2-135m [thinking on, 4096]"}
    # tokens scale, 1K..4K: the weights of 1K, 2K, 4K are 1/6, 1/2, 1/3 of the range
    assert float(avg["smollm2-135m"]["auc_4k"]) == round(100 * (0.9 / 6 + 0.6 / 2 + 0.3 / 3), 4)
    assert float(avg["smollm2-135m [thinking on, 4096]"]["auc_4k"]) > float(avg["smollm2-135m"]["auc_4k"])
    assert float(avg["smollm2-135m"]["auc_4k_lo"]) < float(avg["smollm2-135m"]["auc_4k"])


def test_bad_auc_lengths_are_one_line_and_write_nothing(user_in_process):
    for flag, field in (("--auc 128K,12X", "--auc: '12X' is not a length"),
                        ("--auc-scale ln", "--auc-scale: 'ln' is not one of tokens, log2")):
        r = user_in_process.run(f"ctxbench board build --store runs --out board {flag}")
        assert r.code == 2, r.err
        assert r.last_err_line.startswith(f"error: {field}"), r.err
        assert len([x for x in r.err.splitlines() if x.strip()]) == 1, r.err
        assert not (user_in_process.cwd / "board").exists() and not (user_in_process.cwd / "runs").exists()
