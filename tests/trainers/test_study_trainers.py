"""The hqa_sft and logo trainers as study methods beside a CPT packing: the same suite, seeds, untrained row and
held-out perplexity. hqa_sft synthesizes its conversations (stub generator) from the study corpus without the
held-out documents, in every stage, with the method's composition; logo makes its preference data (fake generator)
with the study's seed. Tiny random models; bad method settings are one line when the study loads."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest
import yaml

from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.studies import load_study, run_study

REPO = Path(__file__).resolve().parents[2]
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "tie_word_embeddings": True, "max_position_embeddings": 4096}
EVAL = {"suite": {"name": "e", "lengths": [256], "samples": 1,
                  "tasks": [{"task": "niah/single", "args": {"depths": [50], "tokens_to_generate": 4}}]},
        "backend_args": {"dtype": "float32", "threads": 1}}


def _stub_module():
    spec = importlib.util.spec_from_file_location("hqa_data_tests_study", Path(__file__).with_name("test_hqa_data.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class HQAStubBackend:
    """test_hqa_data's deterministic stub generator as a registered backend (the study builds generators by name)."""

    name = "hqa-stub"
    context_length = 8192
    calls = 0

    def __init__(self, *, model: str, **_):
        from ctxbench.harness.core.models import load_tokenizer

        self.tokenizer = load_tokenizer(model)
        self._stub = _stub_module().StubBackend(self.tokenizer)

    def generate(self, requests):
        HQAStubBackend.calls += len(requests)
        return self._stub.generate(requests)


registry.register("backend", "hqa-stub")(HQAStubBackend)


def hqa_data_yaml(tmp_path: Path) -> Path:
    """configs/data/hqa-tiny.yaml made smaller (64/192-token chunks, 24-token replies) with the stub generator."""
    raw = yaml.safe_load((REPO / "configs" / "data" / "hqa-tiny.yaml").read_text())
    raw.update(generator={"model": "smollm2-135m", "backend": "hqa-stub", "max_new_tokens": 24, "answer_prefix": ""},
               small_tokens=64, medium_tokens=192, max_document_tokens=192, documents_per_sample=1, target_tokens=768,
               cache_dir=str(tmp_path / "hqa-calls"))
    p = tmp_path / "hqa-data.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def write(tmp_path: Path, raw: dict) -> Path:
    p = tmp_path / "study.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def hqa_study(tmp_path: Path, data_dir: Path) -> dict:
    data = str(hqa_data_yaml(tmp_path))
    stages = [{"name": "s1", "data": data, "data_args": {"target_tokens": 512}, "seq_len": 512, "rope": {"theta": 20000.0},
               "max_steps": 2},
              {"name": "s2", "data": data, "seq_len": 768, "rope": {"theta": 40000.0}, "max_steps": 2}]
    return {
        "name": "hqa-mix", "out_dir": str(tmp_path / "s"),
        "corpus": {"path": str(data_dir / "squad" / "dev-v2.0.json"), "format": "squad"},
        "methods": [{"name": "packed", "trainer": "cpt", "data": {"method": "standard", "eval_sequences": 2},
                     "training": {"max_steps": 2}},
                    {"name": "hs", "data": {"composition": {"after": "hs", "revisit": "hs"}}, "training": {"stages": stages}},
                    {"name": "h-nosum", "data": {"composition": {"after": "h", "revisit": "s", "summary": False}},
                     "training": {"stages": stages}}],
        "reference": "packed", "trainer": "hqa_sft", "seeds": [0], "vary_packing": False, "budget_tokens": 768 * 6,
        "seq_len": 768, "base_model": {"config": TINY},
        "training": {"per_device_batch_size": 2, "learning_rate": 1e-3, "save_steps": 10, "threads": 1, "lr_scheduler": "constant"},
        "perplexity": {"lengths": [128], "documents": 3}, "stats": {"n_boot": 200}, "eval": EVAL}


@pytest.mark.slow  # > 25 s; the default tier keeps a faster test of the same behaviour
def test_hqa_sft_methods_beside_a_packing_in_one_study(tmp_path, data_dir):
    from rich.console import Console

    raw = hqa_study(tmp_path, data_dir)
    wrong = {**raw, "training": {**raw["training"], "stages": raw["methods"][1]["training"]["stages"]}}
    with pytest.raises(ConfigError, match=r"methods.packed.training: stages: unknown key"):
        load_study(write(tmp_path, wrong))  # shared stages reach cpt, which has none: one line when the study loads
    study = load_study(write(tmp_path, raw))
    result = run_study(study, data_dir=data_dir, console=Console(file=io.StringIO(), width=200))
    by = {t.method: t for t in result.trained}
    heldout = {json.loads(line)["id"] for line in next((tmp_path / "s" / "heldout").iterdir()).joinpath("heldout.jsonl").open()}
    titles = {a["title"] for a in json.loads((data_dir / "squad" / "dev-v2.0.json").read_text())["data"]}
    assert len(heldout) == 3 and heldout <= titles

    for name, after, summary in (("hs", "hs", True), ("h-nosum", "h", False)):
        t = by[name]
        manifest = json.loads((t.checkpoint / "ctxbench_manifest.json").read_text())
        assert manifest["trainer"] == "hqa_sft" and manifest["stage"] == "s2"  # the scored checkpoint is the last stage's
        stage_dirs = sorted((tmp_path / "s" / "data" / name).glob("*/s*"))
        assert [d.name for d in stage_dirs] == ["s1", "s2"]
        stage_tokens = 0
        for d in stage_dirs:
            m = json.loads((d / "manifest.json").read_text())
            assert m["config"]["composition"]["after"] == after and m["config"]["composition"]["summary"] is summary
            assert m["config"]["documents"]["format"] == "corpus" and m["samples"] == 768 * 6 // m["config"]["target_tokens"]
            rows = [json.loads(line) for s in m["shards"] for line in (d / s).open()]
            docs = {doc for r in rows for doc in r["meta"]["documents"]}
            assert docs and docs <= titles and not docs & heldout  # study-corpus documents, none held out
        for stage in ("s1", "s2"):  # steps and tokens of both stages are the method's
            run = next(p for p in (tmp_path / "s" / "train").glob(f"train-hqa_sft-{name}-s0-{stage}-*"))
            stage_tokens += json.loads((run / "model" / "ctxbench_manifest.json").read_text())["tokens"]["trained"]
        assert t.steps == 4 and t.tokens == stage_tokens
    assert by["hs"].data_hash != by["h-nosum"].data_hash  # the composition reached the data

    res = json.loads(result.json.read_text())
    assert {(c["measure"], c["a"], c["b"]) for c in res["comparisons"]} == {
        (m, a, b) for m in ("task score", "ppl/heldout-full")
        for a, b in (("packed", "untrained"), ("hs", "untrained"), ("h-nosum", "untrained"), ("hs", "packed"), ("h-nosum", "packed"))}
    summary = result.summary.read_text()
    assert "stage s1" in summary and "stage s2" in summary

    console = Console(file=io.StringIO(), width=200)
    calls = HQAStubBackend.calls
    run_study(study, data_dir=data_dir, console=console)  # complete: no synthesis, training or scoring
    log = console.file.getvalue()
    assert HQAStubBackend.calls == calls and "training (" not in log and log.count("already trained") == 3


@pytest.mark.slow  # > 25 s; the default tier keeps a faster test of the same behaviour
def test_logo_and_its_sft_baseline_beside_a_packing(tmp_path, data_dir, logo_config):
    from rich.console import Console

    data_yaml = tmp_path / "logo-data.yaml"
    data_yaml.write_text(yaml.safe_dump(logo_config(tmp_path / "ignored", max_samples=12)))
    raw = {"name": "logo-mix", "out_dir": str(tmp_path / "s"), "corpus": {"path": "stdlib:json", "max_doc_tokens": 128},
           "methods": [{"name": "packed", "data": {"method": "standard", "eval_sequences": 2}},
                       {"name": "logo", "trainer": "logo", "data": {"data": str(data_yaml), "eval_samples": 2},
                        "training": {"lora": {"r": 4, "alpha": 8}}},
                       {"name": "sft", "trainer": "logo", "data": {"data": str(data_yaml), "eval_samples": 2},
                        "training": {"lora": {"r": 4, "alpha": 8}, "objective": "sft"}}],
           "reference": "packed", "seeds": [0, 1], "budget_tokens": 128 * 6, "seq_len": 128, "base_model": {"config": TINY},
           "training": {"max_steps": 2, "per_device_batch_size": 2, "learning_rate": 1e-3, "save_steps": 10, "threads": 1},
           "perplexity": {"lengths": [128], "documents": 3}, "stats": {"n_boot": 200}, "eval": EVAL}
    study = load_study(write(tmp_path, raw))
    result = run_study(study, data_dir=data_dir, console=Console(file=io.StringIO(), width=200))
    assert [(t.method, t.seed) for t in result.trained] == [(m, s) for m in ("packed", "logo", "sft") for s in (0, 1)]
    for t in result.trained[2:]:
        manifest = json.loads((t.checkpoint / "ctxbench_manifest.json").read_text())
        assert manifest["trainer"] == "logo" and manifest["objective"] == t.method
        data = Path(json.loads((t.run_dir / "record.json").read_text())["data"]["path"])
        m = json.loads((data / "manifest.json").read_text())
        assert data.is_relative_to(tmp_path / "s" / "data" / t.method) and m["config"]["seed"] == t.seed
        assert (t.checkpoint / "model.safetensors").exists() and (t.checkpoint / "adapter").is_dir()  # merged for scoring
    logo = [t for t in result.trained if t.method == "logo"]
    assert logo[0].data_hash != logo[1].data_hash  # each seed makes its own data (vary_packing)
    res = json.loads(result.json.read_text())
    assert {(c["a"], c["b"]) for c in res["comparisons"]} == {("packed", "untrained"), ("logo", "untrained"),
                                                               ("sft", "untrained"), ("logo", "packed"), ("sft", "packed")}
    assert "preference" in result.summary.read_text()


@pytest.mark.parametrize("change, hint", [
    (lambda r: r["methods"][1]["data"].update(data_args={"seed": 3}), "data_args: seed is set by the study"),
    (lambda r: r["methods"][1]["data"].update(data_args={"chunk_tokens": 2}), "chunk_tokens"),
    (lambda r: r["methods"][1]["data"].update(eval_sampls=2), "methods.logo.data: eval_sampls: unknown key"),
    (lambda r: r["methods"][1]["data"].update(data="nope.yaml"), "nope.yaml"),
])
def test_bad_logo_method_is_one_line(tmp_path, data_dir, logo_config, change, hint):
    data_yaml = tmp_path / "logo-data.yaml"
    data_yaml.write_text(yaml.safe_dump(logo_config(tmp_path / "x")))
    raw = {"name": "t", "corpus": {"path": "stdlib:json"}, "reference": "packed", "budget_tokens": 1024, "seq_len": 128,
           "base_model": "smollm2-135m", "eval": EVAL,
           "methods": [{"name": "packed", "data": {"method": "standard"}},
                       {"name": "logo", "trainer": "logo", "data": {"data": str(data_yaml)}}]}
    change(raw)
    with pytest.raises(ConfigError) as e:
        load_study(write(tmp_path, raw))
    assert hint in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("change, hint", [
    (lambda r: r.update(seq_len=1024), "the last stage's seq_len (2048) must equal the study's seq_len (1024)"),
    (lambda r: r["methods"][0]["data"].update(composition={"counts": "sometimes"}), "composition.counts"),
    (lambda r: r["methods"][0]["data"].update(data_args={"out_dir": "x"}), "data_args: out_dir is set by the study"),
    (lambda r: r["training"].pop("stages"), "hqa_sft needs its stages"),
])
def test_bad_hqa_method_is_one_line(tmp_path, change, hint):
    raw = yaml.safe_load((REPO / "configs" / "studies" / "hqa-ablation-cpu.yaml").read_text())
    change(raw)
    with pytest.raises(ConfigError) as e:
        load_study(write(tmp_path, raw))
    assert hint in str(e.value) and "\n" not in str(e.value)


def test_the_trainers_study_config_compares_cpt_logo_and_hqa_sft():
    study = load_study(REPO / "configs" / "studies" / "cpu-trainers.yaml")
    assert {study.trainer_of(m) for m in study.methods} == {"cpt", "logo", "hqa_sft"} and len(study.seeds) >= 3
    assert study.perplexity is not None
