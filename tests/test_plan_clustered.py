"""`ctxbench plan` on the families with many questions per context (Oolong, AA-LCR, LongBench Pro): `score --until`
refuses them, so the plan prints that refusal's one line instead of --until tables, and keeps the full protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


@pytest.mark.parametrize("suite,task", [("oolong-quick", "oolong/synth"), ("aalcr-quick", "aalcr"),
                                        ("longbenchpro-quick", "longbenchpro/")])
def test_plan_prints_the_until_refusal_instead_of_a_table(suite, task, ctxbench):
    code, out, err = ctxbench("plan", "--suite", suite, "--samples-per-second", "1", "--width", "10")
    assert code == 0, err
    text = " ".join(out.split())
    assert f"--until: {task}" in text and "rounds are not independent" in text and "leave it out (--tasks)" in text
    assert "expected samples per length" not in text and "whole suite:" not in text  # no --until table
    assert "full protocol" in text
    code, out, err = ctxbench("plan", "--suite", suite, "--json")
    report = json.loads(out)
    assert code == 0 and report["targets"] == [] and report["until_refused"].startswith(f"--until: {task}")
    assert report["full_samples"] > 0


def test_plan_of_independent_samples_keeps_its_tables(ctxbench):
    code, out, err = ctxbench("plan", "--suite", "ruler2-quick", "--json")
    report = json.loads(out)
    assert code == 0 and report["targets"] and "until_refused" not in report


def test_plan_and_score_give_one_reason(ctxbench, tmp_path, monkeypatch):
    """The plan's line is score --until's, with what the task declares it shares in place of its first cluster id."""
    monkeypatch.delenv("CTXBENCH_DATA_DIR", raising=False)
    code, planned, _ = ctxbench("plan", "--suite", "oolong-quick", "--json")
    code, _, err = ctxbench("score", "--backend", "echo", "--model", "smollm2-135m", "--suite", "oolong-quick",
                            "--data-dir", str(TESTS / "oolong" / "data"), "--store", str(tmp_path / "runs"),
                            "--until", "effective-length")
    refused = json.loads(planned)["until_refused"]
    scored = " ".join(err.split()).removeprefix("error: ")
    assert code == 2 and scored.split(" (")[0] in refused and refused.split("), ")[1] in scored
