"""Journey: train the tiny checkpoint into the store, score it, build the board (issue 21 item 1).

A training and a scoring share the store (`runs/*/record.json`); the board must show one row for the model, no
provenance row for the training, and still say what trained the checkpoint (from its manifest).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import User


@pytest.mark.slow  # ~9 s
def test_a_training_in_the_store_is_not_a_scored_run(user: User, tiny_checkpoint: Path, data_dir):
    training = tiny_checkpoint.parent  # runs/train-cpt-tiny-.../ : record.json, losses.jsonl, model/
    shutil.copytree(training, user.cwd / "runs" / training.name)
    model = f"runs/{training.name}/model"
    r = user.run(f"ctxbench score --model {model} --label tiny-standard --backend echo --suite ruler-quick "
                 "--tasks ruler/niah_single_1 --lengths 512 --samples 2")
    assert r.code == 0, r.err
    r = user.run("ctxbench board build")
    assert r.code == 0, r.err
    assert "different models" not in r.err
    md = (user.cwd / "board" / "leaderboard.md").read_text()
    main = md.split("## Main results", 1)[1].split("\n## ", 1)[0]
    assert sum(line.startswith("| tiny-standard") for line in main.splitlines()) == 1, main
    provenance = md.split("## Provenance", 1)[1]
    assert "name:" not in provenance and training.name not in _run_column(provenance)
    assert "0/0" not in provenance
    assert "seeds: 42;" in md and "42.0" not in md
    assert "## Training" in md and "cpt" in md.split("## Training", 1)[1]  # provenance from the manifest


def _run_column(section: str) -> set[str]:
    return {line.strip("|").split(" | ")[0].strip() for line in section.splitlines() if line.startswith("| ")}


def test_old_training_records_without_a_kind_are_told_by_shape(tmp_path: Path):
    """A training record without `kind` (its trainer and config, no suite) is a training to every store reader;
    a scored record from before `kind` (4eafb19: suite_config, no kind) stays a scored run."""
    import json

    from ctxbench.harness.core.store import TRAINING, list_runs, run_dirs

    for run_id, rec in (("old-train", {"run_id": "old-train", "trainer": "cpt", "config": {}, "seed": 42.0}),
                        ("old-score", {"run_id": "old-score", "suite_config": {}, "seed": 42, "schema_version": 2})):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "record.json").write_text(json.dumps(rec))
    assert [s.dir.name for s in list_runs(tmp_path)] == ["old-score"]
    assert [d.name for d in run_dirs(tmp_path, TRAINING)] == ["old-train"]
