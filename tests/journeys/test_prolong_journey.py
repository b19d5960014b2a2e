"""The ProLong-style recipe at CPU scale, as a user runs it: `ctxbench train cpt --config
configs/trainers/prolong-tiny.yaml` packs the long/short mix with document masking and trains with the loss in
chunks (data -> train), then the printed `score it:` command scores the checkpoint (-> score)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow  # about a minute and a half on two shared cores: packing, 6 steps, a 512-token quick suite
def test_the_prolong_preset_runs_data_train_score(user):
    r = user.run("ctxbench train cpt --config configs/trainers/prolong-tiny.yaml")
    assert r.code == 0, r.err[-3000:]
    manifest = json.loads((user.cwd / "packed" / "prolong-tiny" / "manifest.json").read_text())
    assert manifest["config"]["attention"] == "per_document" and manifest["complete"]
    methods = manifest["stats"]["methods"]
    long, short = methods["within_domain"]["sequences"], methods["standard (mix)"]["sequences"]
    assert short / (long + short) == pytest.approx(0.4, abs=0.1)  # ProLong's long:short 60:40, in whole sequences
    [record] = [json.loads(p.read_text()) for p in (user.cwd / "runs").glob("train-*/record.json")]
    assert record["status"] == "complete" and record["config"]["loss_chunk_tokens"] == 64
    (hint,) = [x.removeprefix("score it: ") for x in r.out.splitlines() if x.startswith("score it: ")]
    s = user.run(hint)
    assert s.code == 0, s.err[-3000:]
    scored = [json.loads(p.read_text()) for p in (user.cwd / "runs").glob("*/record.json")]
    assert any(x.get("suite") == "ruler-quick" and x["label"] == "prolong-tiny" for x in scored)
