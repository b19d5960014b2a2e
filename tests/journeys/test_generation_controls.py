"""Journey: lm-eval's and HELMET's generation controls (issue 25, part 2): a system prompt, sampled decoding with
repeats. The store keeps every repeat; the board averages each sample's repeats before any statistic, so a cell's n
counts samples, never repeats. The commands run in process (`user_in_process`)."""

from __future__ import annotations

import json
from collections import defaultdict

from .conftest import rows


def test_system_prompt_sampling_and_repeats_end_to_end(user_in_process):
    score = ("ctxbench score --backend echo --tasks ruler/niah_single_1 --lengths 1024 --samples 6 --store runs "
             "--gen-kwargs temperature=0.8,top_p=0.9,seed=3 --repeats 3")
    refused = user_in_process.run(score.replace(" --gen-kwargs temperature=0.8,top_p=0.9,seed=3", ""))
    assert refused.code == 2 and refused.err.startswith("error: --repeats 3: greedy decoding"), refused.err
    r = user_in_process.run([*score.split(), "--system_instruction", "Answer with the number only."])
    assert r.code == 0, r.err[-3000:]
    run_dir = next(p for p in (user_in_process.cwd / "runs").iterdir() if (p / "record.json").exists())
    record = json.loads((run_dir / "record.json").read_text())
    assert record["generation"] == {"system_prompt": "Answer with the number only.", "repeats": 3,
                                    "gen_kwargs": {"temperature": 0.8, "top_p": 0.9, "seed": 3}}
    got = [json.loads(line) for line in rows(run_dir)]
    assert len(got) == 18 and {row["repeat"] for row in got} == {0, 1, 2}  # every repeat is kept
    per_sample = defaultdict(list)
    for row in got:
        per_sample[row["index"]].append(row["score"])
    means = [sum(v) / len(v) for v in per_sample.values()]
    assert len(set(map(tuple, per_sample.values()))) > 1 and any(0 < m < 1 for m in means)  # repeats differ

    board = user_in_process.run("ctxbench board build --store runs --out board")
    assert board.code == 0, board.err
    results = json.loads((user_in_process.cwd / "board" / "results.json").read_text())
    cell = next(t for t in results["tasks"] if t["task"] == "ruler/niah_single_1" and t["length"] == 1024)
    assert cell["n"] == 6 and abs(cell["mean"] - 100 * sum(means) / len(means)) < 1e-6, cell
    assert "3 repeats" in cell["model"] and "system prompt" in cell["model"] and "T=0.8" in cell["model"]


def test_repeated_gen_kwargs_add_up(user_in_process):
    """`--gen-kwargs temperature=0.7 --gen-kwargs seed=1` is the comma form, not only the last one."""
    r = user_in_process.run("ctxbench score --tasks ruler/niah_single_1 --lengths 512 --samples 1 --backend echo "
                 "--gen-kwargs temperature=0.7 --gen-kwargs seed=1 --repeats 2")
    assert r.code == 0, r.err[-2000:]
    (record,) = (user_in_process.cwd / "runs").glob("*/record.json")
    generation = json.loads(record.read_text())["generation"]
    assert "0.7" in json.dumps(generation) and '"seed": 1' in json.dumps(generation), generation
