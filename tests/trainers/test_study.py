"""Head-to-head studies: configs validate, the stdlib corpus, a tiny end-to-end study that resumes, the CPU study."""

from __future__ import annotations

import json
import sysconfig
import time
from pathlib import Path

import pytest
import yaml

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.study import load_study, run_study
from ctxbench.trainers.data.corpus import resolve_corpus

REPO = Path(__file__).resolve().parents[2]
# hqa-*: studies of other trainers (hqa_sft) wait for issue 12's trainer-method interface; tests/trainers/test_hqa_sft.py
# validates their data and trainer settings meanwhile
STUDIES = sorted(p for p in (REPO / "configs" / "studies").glob("*.yaml") if not p.name.startswith("hqa-"))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_shipped_study_configs_validate(path):
    study = load_study(path)
    assert study.baseline in [m.label for m in study.methods] and len(study.methods) >= 2
    if study.training.get("deepspeed"):
        assert (REPO / "configs" / "deepspeed" / f"{study.training['deepspeed']}.json").exists()


def test_cpu_study_is_the_stdlib_repo_and_bm25_setting():
    study = load_study(REPO / "configs" / "studies" / "cpu-stdlib.yaml")
    assert study.corpus["path"] == "stdlib:"
    assert {(m.method, m.method_args.get("retriever")) for m in study.methods} >= {("standard", None), ("splice", "repo"),
                                                                                  ("splice", "bm25")}


def _write(tmp_path, raw) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


BASE = {"name": "t", "corpus": {"path": "stdlib:json"}, "methods": [{"method": "standard"}, {"method": "within_domain"}],
        "budget_tokens": 4096, "seq_len": 128, "base_model": "smollm2-135m",
        "eval": {"suite": {"name": "e", "lengths": [256], "samples": 1, "tasks": ["niah/single"]}}}


@pytest.mark.parametrize("change, hint", [
    ({"baseline": "splice"}, "baseline 'splice' is not among the methods"),
    ({"methods": [{"method": "standard"}, {"method": "standard"}]}, "two methods are named 'standard'"),
    ({"training": {"output_dir": "x"}}, "output_dir is set by the study"),
    ({"training": {"learning_rat": 1}}, "training: learning_rat: unknown key"),
    ({"methods": [{"method": "standard"}, {"method": "splice", "method_args": {"retriver": "bm25"}}]}, "retriver"),
    ({"methods": [{"method": "standard"}, {"method": "splcie"}]}, "did you mean 'splice'"),
    ({"eval": {"suite": {"name": "e", "lengths": [256], "samples": 1, "tasks": ["niah/singel"]}}}, "niah/singel"),
])
def test_bad_study_is_one_line(tmp_path, change, hint):
    with pytest.raises(ConfigError) as e:
        load_study(_write(tmp_path, {**BASE, **change}))
    assert hint in str(e.value) and "\n" not in str(e.value)


def test_stdlib_corpus_is_a_filtered_copy(tmp_path):
    corpus = resolve_corpus({"path": "stdlib:json,email", "text_field": "text"}, tmp_path)
    root = Path(corpus["path"])
    assert corpus["format"] == "repo" and corpus["text_field"] == "text" and root.is_absolute()
    assert sorted(p.name for p in root.iterdir()) == [".complete", "email", "json"]
    assert (root / "json" / "decoder.py").read_text() == (Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py").read_text()
    assert resolve_corpus({"path": "stdlib:json,email"}, tmp_path)["path"] == str(root)  # copied once
    whole = Path(resolve_corpus({"path": "stdlib:"}, tmp_path)["path"])
    names = {p.name for p in whole.iterdir()}
    assert {"json", "asyncio", "os.py"} <= names and not names & {"site-packages", "test", "idlelib"}
    with pytest.raises(ConfigError, match="no standard-library package 'nosuchpkg'"):
        resolve_corpus({"path": "stdlib:nosuchpkg"}, tmp_path)


def test_tiny_study_end_to_end_then_resumes_without_work(tmp_path, data_dir):
    raw = {**BASE, "out_dir": str(tmp_path / "study"), "budget_tokens": 128 * 12,
           "base_model": {"config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                     "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": True}},
           "training": {"max_steps": 2, "per_device_batch_size": 2, "learning_rate": 1e-3, "save_steps": 2, "threads": 1},
           "data": {"eval_sequences": 2},
           "eval": {"suite": {"name": "e", "lengths": [256], "samples": 1,
                              "tasks": [{"task": "niah/single", "args": {"depths": [25, 75], "tokens_to_generate": 4}}]},
                    "backend_args": {"dtype": "float32", "threads": 1}}}
    study = load_study(_write(tmp_path, raw))
    result = run_study(study, data_dir=data_dir)
    assert [m.name for m in result.methods] == ["standard", "within_domain"]
    assert all((m.checkpoint / "ctxbench_manifest.json").exists() and m.train_tokens == 2 * 2 * 128 for m in result.methods)
    res = json.loads(result.report.json.read_text())
    assert {m["model"] for m in res["models"]} == {"standard", "within_domain"}  # runs are labelled by method
    assert [(c["model_a"], c["model_b"], c["n_pairs"]) for c in res["comparisons"]] == [("within_domain", "standard", 2)]
    summary = result.summary.read_text()
    assert "within\\_domain" in summary and "Δ vs standard" in summary and "baseline" in summary
    state = json.loads((tmp_path / "study" / "state.json").read_text())
    assert set(state) == {"synthesize:standard", "synthesize:within_domain", "score:standard", "score:within_domain"}

    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "study").rglob("*.safetensors")}
    again = run_study(study, data_dir=data_dir)  # everything is complete: no packing, training or scoring
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "study").rglob("*.safetensors")} == mtimes
    assert [m.score_run for m in again.methods] == [m.score_run for m in result.methods]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_cpu_stdlib_study_end_to_end(tmp_path, data_dir):
    """The shipped CPU study (SmolLM2-135M, three packings, NIAH + KV): minutes, not seconds."""
    study = load_study(REPO / "configs" / "studies" / "cpu-stdlib.yaml").model_copy(update={"out_dir": str(tmp_path / "s")})
    start = time.perf_counter()
    result = run_study(study, data_dir=data_dir)
    assert time.perf_counter() - start < 45 * 60
    res = json.loads(result.report.json.read_text())
    assert {m["model"] for m in res["models"]} == {"standard", "splice-repo", "splice-bm25"}
    assert {(c["model_a"], c["model_b"]) for c in res["comparisons"]} == {("splice-repo", "standard"), ("splice-bm25", "standard")}
    assert all(c["n_pairs"] == 45 for c in res["comparisons"])  # (5 + 5 depths, 5 positions) x 3 lengths
