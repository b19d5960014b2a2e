"""`ctxbench export lm-eval`: our tasks as lm-eval tasks, one per (task, length), generated and scored by ctxbench."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("lm_eval")

SUITE = """name: exp-test
seed: 42
lengths: [512, 640]
samples: 2
tasks: [ruler/niah_single_1, ruler/qa_1]
"""


def _export(tmp_path, *extra):
    from typer.testing import CliRunner

    from ctxbench.harness.cli import app

    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "lm_eval_tasks"
    res = CliRunner().invoke(app, ["export", "lm-eval", str(out), "--suite", str(suite), *extra])
    assert res.exit_code == 0, res.output
    return out


def test_export_writes_one_task_per_length_in_groups(tmp_path):
    from lm_eval.tasks import TaskManager

    out = _export(tmp_path)
    names = {p.stem for p in out.glob("ctxbench_*.yaml")}
    assert names == {f"ctxbench_ruler_{t}_{L}" for t in ("niah_single_1", "qa_1") for L in (512, 640)}
    cfg = yaml.safe_load((out / "ctxbench_ruler_qa_1_640.yaml").read_text().replace("!function ", ""))
    assert cfg["dataset_kwargs"]["ctxbench_length"] == 640 and cfg["dataset_kwargs"]["ctxbench_seed"] == 42
    assert [m["metric"] for m in cfg["metric_list"]] == ["score"]  # one real metric; no per-length placeholders
    assert cfg["metadata"]["ctxbench_metric"] == "string_match_part"
    assert cfg["generation_kwargs"]["max_gen_toks"] == 32 and cfg["generation_kwargs"]["do_sample"] is False
    group = yaml.safe_load((out / "_ctxbench_exp_test_512.yaml").read_text())
    assert sorted(group["task"]) == ["ctxbench_ruler_niah_single_1_512", "ctxbench_ruler_qa_1_512"]

    tm = TaskManager(include_path=str(out), include_defaults=False)  # lm-eval reads them as written
    assert names | {"ctxbench_exp_test", "ctxbench_exp_test_512", "ctxbench_exp_test_640", "ctxbench_ruler_qa_1"} <= set(tm.all_tasks)
    assert set(tm.all_groups) == {"ctxbench_exp_test", "ctxbench_exp_test_512", "ctxbench_exp_test_640"}


def test_exported_tasks_use_our_samples_and_score_qa_any_of(tmp_path, make_stub, smol_tokenizer, data_dir, monkeypatch):
    """Run the exported group through lm-eval with an oracle that answers each QA sample with its LAST reference:
    any-of scoring (ours) gives 1; lm-eval's own RULER QA (fraction of references) would not."""
    from ctxbench.harness.core import datasets, registry
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.metrics import string_match_all
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.tasks.lmeval.adapter import evaluate

    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path / "cache"))  # generated from scratch, in lm-eval's task order
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(data_dir))
    out = _export(tmp_path, "--lengths", "512")

    # The same samples, generated independently (no cache, other order).
    ctx = GenContext(smol_tokenizer, PromptRenderer(smol_tokenizer), data_dir=data_dir)
    ours = {}
    for name in ("ruler/qa_1", "ruler/niah_single_1"):
        for s in datasets.generate(registry.get("task", name)(), length=512, indices=range(2), seed=42, ctx=ctx, use_cache=False):
            ours[s.prompt] = s
    oracle = make_stub(lambda prompt: " " + (ours[prompt].answers[-1] if ours[prompt].metric == "string_match_part"
                                             else ", ".join(ours[prompt].answers)))

    results = evaluate(oracle, ["ctxbench_exp_test"], include_path=str(out), include_defaults=False, bootstrap_iters=0)
    logged = {t: [s["arguments"][0][0] for s in v] for t, v in results["samples"].items()}
    assert sorted(logged) == ["ctxbench_ruler_niah_single_1_512", "ctxbench_ruler_qa_1_512"]
    for prompts in logged.values():
        assert len(prompts) == 2 and all(p in ours for p in prompts)  # exactly our prompts
    assert results["results"]["ctxbench_ruler_qa_1_512"]["score,none"] == 1.0
    assert results["results"]["ctxbench_ruler_niah_single_1_512"]["score,none"] == 1.0
    assert results["results"]["ctxbench_exp_test_512"]["score,none"] == 1.0
    qa = [ours[p] for p in logged["ctxbench_ruler_qa_1_512"]]
    assert any(string_match_all(s.answers[-1], s.answers) < 1 for s in qa), "no sample tells any-of from all-of"
    assert [r.max_new_tokens for r in oracle.generated if ours[r.prompt].task == "ruler/qa_1"] == [32, 32]


def test_process_results_is_any_of_for_qa(smol_tokenizer, data_dir, monkeypatch):
    from ctxbench.harness.lmeval_export.tasklib import process_results, samples

    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(data_dir))
    monkeypatch.setenv("CTXBENCH_TOKENIZER", "smollm2-135m")
    docs = samples(ctxbench_task="ruler/qa_1", ctxbench_length=512, ctxbench_samples=1, ctxbench_seed=42)
    doc = docs[0]
    assert len(doc["answers"]) >= 2 and doc["metric"] == "string_match_part"
    assert process_results(doc, [f"It is {doc['answers'][-1]}."]) == {"score": 1.0}
    assert process_results(doc, ["no idea"]) == {"score": 0.0}


def test_missing_tokenizer_says_how_to_pass_one(monkeypatch):
    from ctxbench.harness.lmeval_export.tasklib import tokenizer_spec

    monkeypatch.delenv("CTXBENCH_TOKENIZER", raising=False)
    with pytest.raises(ValueError, match="--model_args pretrained="):
        tokenizer_spec({"version": 1})
    assert tokenizer_spec({"pretrained": "/m"}) == "/m" and tokenizer_spec({}, "smollm2-135m") == "smollm2-135m"
    monkeypatch.setenv("CTXBENCH_TOKENIZER", "/env")
    assert tokenizer_spec({"pretrained": "/m"}) == "/env"


@pytest.mark.integration
@pytest.mark.slow  # ~40-75 s on 2 CPU cores; the same tasks run in-process through lm-eval's evaluator above
def test_exported_task_runs_under_lm_eval_cli(tmp_path, repo_root, data_dir):
    """lm-eval's own CLI and HF model on the exported task, with nothing from ctxbench but the task directory."""
    from ctxbench.harness.core.models import materialize, resolve

    out = _export(tmp_path, "--lengths", "512", "--samples", "1", "--tasks", "ruler/niah_single_1")
    model_dir = materialize(resolve("smollm2-135m"))
    env = {**os.environ, "PYTHONPATH": f"{repo_root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "CTXBENCH_DATA_DIR": str(data_dir), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32",
           "--include_path", str(out), "--tasks", "ctxbench_ruler_niah_single_1_512", "--limit", "2", "--device", "cpu",
           "--output_path", str(tmp_path / "results")]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (res,) = (tmp_path / "results").rglob("results_*.json")
    score = json.loads(res.read_text())["results"]["ctxbench_ruler_niah_single_1_512"]["score,none"]
    assert 0.0 <= score <= 1.0
    assert "ruler/niah_single_1 @ 512" in r.stdout  # the task alias in lm-eval's table
