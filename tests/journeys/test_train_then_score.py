"""Issue 21 item 15: `ctxbench train` prints a `score it:` command that fits the checkpoint (cpt-tiny's context is
512 tokens and ruler-quick starts at 1K), and that command runs as printed. Both run in process (`user_in_process`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def test_the_printed_score_it_line_runs_as_printed(user_in_process, tiny_checkpoint: Path):
    work = tiny_checkpoint.parents[2]  # the fixture's directory: runs/train-.../model, packed/
    for name in ("runs", "packed"):
        shutil.copytree(work / name, user_in_process.cwd / name)
    r = user_in_process.run("ctxbench train cpt --config configs/trainers/cpt-tiny.yaml --max-steps 4")  # already trained: the hint again
    assert r.code == 0, r.err[-3000:]
    (hint,) = [x.removeprefix("score it: ") for x in r.out.splitlines() if x.startswith("score it: ")]
    assert hint.startswith("ctxbench score --model runs/train-cpt-tiny-standard-") and "--lengths 512" in hint
    s = user_in_process.run(hint)
    assert s.code == 0, s.err[-3000:]
    records = [json.loads(p.read_text()) for p in (user_in_process.cwd / "runs").glob("*/record.json")]
    (scored,) = [x for x in records if x.get("suite") == "ruler-quick"]
    assert scored["label"] == "tiny-standard" and scored["suite_config"]["lengths"] == [512]


def test_a_checkpoint_that_holds_the_quick_suite_gets_it_whole(tmp_path: Path):
    from ctxbench.harness.commands.train import score_command

    model = tmp_path / "my model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    assert score_command(model, None) == f"ctxbench score --model '{model}' --suite ruler-quick"
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 1000}))
    assert score_command(model, "a b").endswith("--lengths 1000 --label 'a b'")
