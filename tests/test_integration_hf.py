"""The real embedded model (SmolLM2-135M-Instruct) end to end, at short lengths, through the CLI's main() in this
process (the `ctxbench` fixture): nothing here is about processes, so no test pays a Python start-up and a second
import of torch and transformers."""

import json

import pytest

pytestmark = pytest.mark.integration

SUITE = """name: integ
lengths: [{length}]
samples: 2
tasks: [ruler/niah_single_1, ruler/niah_single_2]
"""


def _score(ctxbench, tmp_path, data_dir, *extra, length: int = 512):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.format(length=length))
    return ctxbench("score", "--model", "smollm2-135m", "--suite", str(suite), "--store", str(tmp_path / "runs"),
                    "--data-dir", str(data_dir), *extra)


def test_scores_real_model_and_prints_table(ctxbench, tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _score(ctxbench, tmp_path, data_dir)
    assert code == 0, err[-2000:]
    assert "ruler/niah_single_1" in out and "average" in out
    (samples,) = (tmp_path / "runs").glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 4
    for row in rows:
        assert row["prompt_tokens"] + row["max_new_tokens"] <= 512
        assert row["generated_tokens"] > 0 and row["seconds"] > 0
    # The passkey task is easy at 512 tokens for this model (as at 1K); if the prompt, chat template or answer prefix
    # were wrong it would fail to retrieve.
    passkey = [r for r in rows if r["task"] == "ruler/niah_single_1"]
    assert sum(r["score"] for r in passkey) >= 1.0, [r["prediction"] for r in passkey]


def test_over_long_prompt_is_refused_before_any_work(ctxbench, tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _score(ctxbench, tmp_path, data_dir, "--backend-arg", "max_context=700", length=1024)
    assert code == 2
    assert "context of 700 tokens" in err and "--truncation middle" in err and "Traceback" not in err
    assert not list((tmp_path / "runs").glob("*/samples.jsonl"))


@pytest.mark.slow  # > 25 s; the default tier keeps a faster test of the same behaviour
def test_middle_truncation_is_recorded(ctxbench, tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _score(ctxbench, tmp_path, data_dir, "--backend-arg", "max_context=900", "--truncation", "middle",
                          "--tasks", "ruler/niah_single_1", length=1024)
    assert code == 0, err[-2000:]
    (samples,) = (tmp_path / "runs").glob("*/samples.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert rows and all(r["truncated_tokens"] > 0 for r in rows)
    assert all(r["prompt_tokens"] + r["max_new_tokens"] <= 900 for r in rows)
    (record,) = (tmp_path / "runs").glob("*/record.json")
    assert json.loads(record.read_text())["truncation"] == "middle"
