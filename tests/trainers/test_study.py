"""Head-to-head studies: configs validate, the stdlib corpus, the held-out split, a tiny end-to-end study with seeds
that resumes without work and retrains anew (never overwriting) when its packing changes, and the CPU study."""

from __future__ import annotations

import hashlib
import io
import json
import sysconfig
import time
from pathlib import Path

import pytest
import yaml

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.studies import load_study, run_study
from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted((REPO / "configs" / "studies").glob("*.yaml"))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_shipped_study_configs_validate(path):
    study = load_study(path)
    assert study.reference in [m.name for m in study.methods] and len(study.methods) >= 2 and len(study.seeds) >= 3
    assert study.perplexity is not None  # every shipped study scores the shared held-out set
    if study.training.get("deepspeed"):
        assert (REPO / "configs" / "deepspeed" / f"{study.training['deepspeed']}.json").exists()


def test_cpu_study_is_the_stdlib_repo_and_bm25_setting_with_replicates():
    study = load_study(REPO / "configs" / "studies" / "cpu-stdlib.yaml")
    assert study.corpus["path"] == "stdlib:" and study.seeds == [0, 1, 2] and study.reference == "standard"
    assert {(m.data["method"], m.data.get("method_args", {}).get("retriever")) for m in study.methods} == {
        ("standard", None), ("splice", "repo"), ("splice", "bm25")}


def _write(tmp_path, raw) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


BASE = {"name": "t", "corpus": {"path": "stdlib:json"}, "methods": [{"name": "standard", "data": {"method": "standard"}},
                                                                    {"name": "within", "data": {"method": "within_domain"}}],
        "reference": "standard", "budget_tokens": 4096, "seq_len": 128, "base_model": "smollm2-135m",
        "eval": {"suite": {"name": "e", "lengths": [256], "samples": 1, "tasks": ["niah/single"]}}}


@pytest.mark.parametrize("change, hint", [
    ({"reference": "splice"}, "reference 'splice' is not among the methods"),
    ({"methods": [{"name": "a", "data": {"method": "standard"}}, {"name": "a", "data": {"method": "standard"}}]},
     "two methods are named 'a'"),
    ({"methods": [{"name": "untrained", "data": {"method": "standard"}}, {"name": "standard", "data": {"method": "standard"}}]},
     "'untrained' is reserved"),
    ({"training": {"output_dir": "x"}}, "output_dir is set by the study"),
    ({"training": {"seed": 3}}, "seed is set by the study"),
    ({"training": {"learning_rat": 1}}, "training: learning_rat: unknown key"),
    ({"methods": [{"name": "standard", "data": {"method": "standard"}},
                  {"name": "s", "data": {"method": "splice", "method_args": {"retriver": "bm25"}}}]}, "retriver"),
    ({"methods": [{"name": "standard", "data": {"method": "standard"}}, {"name": "s", "data": {"method": "splcie"}}]},
     "did you mean 'splice'"),
    ({"methods": [{"name": "standard", "data": {"method": "standard"}}, {"name": "s", "data": {"method": "splice", "evl_sequences": 2}}]},
     "methods.s.data: evl_sequences: unknown key"),
    ({"methods": [{"name": "standard", "data": {"method": "standard"}}, {"name": "s", "trainer": "cpx"}]}, "did you mean 'cpt'"),
    ({"seeds": [0, 0]}, "each seed once"),
    ({"perplexity": {"lengths": [256], "documents": 1}}, "perplexity.documents"),
    ({"eval": {"suite": {"name": "e", "lengths": [256], "samples": 1, "tasks": ["niah/singel"]}}}, "niah/singel"),
])
def test_bad_study_is_one_line(tmp_path, change, hint):
    with pytest.raises(ConfigError) as e:
        load_study(_write(tmp_path, {**BASE, **change}))
    assert hint in str(e.value) and "\n" not in str(e.value)


def test_heldout_split_is_fixed_by_ids_and_left_out_of_training(tmp_path, smol_tokenizer):
    from ctxbench.harness.studies.heldout import split_heldout
    from ctxbench.trainers.data.corpus import CorpusConfig
    from ctxbench.trainers.data.token_cache import load_corpus

    corpus = resolve_corpus({"path": "stdlib:json,email", "max_doc_tokens": 128}, tmp_path)
    held = split_heldout(corpus, documents=4, min_tokens=600, seed=0, tokenizer="smollm2-135m", root=tmp_path)
    rows = [json.loads(line) for line in held.path.read_text().splitlines()]
    assert len(rows) == 4 and {r["id"] for r in rows} == held.ids and all(r["tokens"] >= 600 for r in rows)
    root = Path(corpus["path"])
    for r in rows:  # whole files, exactly as on disk, their token counts measured independently
        assert r["text"] == (root / r["id"]).read_text()
        assert len(smol_tokenizer(r["text"], add_special_tokens=False)["input_ids"]) == r["tokens"]
    again = split_heldout(corpus, documents=4, min_tokens=600, seed=0, tokenizer="smollm2-135m", root=tmp_path / "x")
    assert again.ids == held.ids  # a function of the ids and the seed only
    assert split_heldout(corpus, documents=4, min_tokens=600, seed=1, tokenizer="smollm2-135m", root=tmp_path).ids != held.ids
    train = load_corpus(CorpusConfig(**held.train_corpus), smol_tokenizer, cache_root=tmp_path / "cache")
    full = load_corpus(CorpusConfig(**corpus), smol_tokenizer, cache_root=tmp_path / "cache")
    assert not set(train.doc_ids()) & held.ids and set(full.doc_ids()) - set(train.doc_ids()) == held.ids
    with pytest.raises(ConfigError, match="only"):
        split_heldout(corpus, documents=4, min_tokens=10 ** 6, seed=0, tokenizer="smollm2-135m", root=tmp_path)


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


TINY = {**BASE, "seeds": [0, 1], "budget_tokens": 128 * 12, "corpus": {"path": "stdlib:json", "max_doc_tokens": 128},
        "base_model": {"config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                  "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": True}},
        "training": {"max_steps": 2, "per_device_batch_size": 2, "learning_rate": 1e-3, "save_steps": 2, "threads": 1},
        "data": {"eval_sequences": 2}, "perplexity": {"lengths": [128], "documents": 3}, "stats": {"n_boot": 200},
        "eval": {"suite": {"name": "e", "lengths": [256], "samples": 1,
                           "tasks": [{"task": "niah/single", "args": {"depths": [25, 75], "tokens_to_generate": 4}}]},
                 "backend_args": {"dtype": "float32", "threads": 1}}}


def weights(root: Path) -> dict[Path, bytes]:
    return {p: hashlib.sha256(p.read_bytes()).digest() for p in root.rglob("model.safetensors")}


@pytest.mark.slow  # ~19 s; studies end to end stay in the default tier: test_study_methods, journeys/test_study_synthesis_methods
def test_tiny_study_end_to_end_then_resumes_without_work(tmp_path, data_dir):
    from rich.console import Console

    study = load_study(_write(tmp_path, {**TINY, "out_dir": str(tmp_path / "study")}))
    result = run_study(study, data_dir=data_dir)
    assert [(t.method, t.seed) for t in result.trained] == [("standard", 0), ("standard", 1), ("within", 0), ("within", 1)]
    assert all(t.steps == 2 and t.tokens == 2 * 2 * 128 for t in result.trained)  # non-padding tokens of packed data
    assert len({t.checkpoint for t in result.trained}) == 4
    # the untrained model is a row, per seed for a from-scratch model (its init depends on the seed)
    assert sorted((s.method, s.seed) for s in result.scored if s.method == "untrained") == [("untrained", 0), ("untrained", 1)]
    res = json.loads(result.json.read_text())
    pairs = [(c["measure"], c["a"], c["b"]) for c in res["comparisons"]]
    measures = ["task score", "ppl/heldout-full"]
    assert pairs == [(m, a, b) for m in measures for a, b in (("standard", "untrained"), ("within", "untrained"),
                                                                ("within", "standard"))]
    assert res["comparisons_in_family"] == 6 and all(c["level"] == pytest.approx(1 - 0.05 / 6) for c in res["comparisons"])
    summary = result.summary.read_text()
    assert "Verdicts" in summary and "after Holm's adjustment over 6 comparisons" in summary and "Bonferroni" in summary
    assert "Held-out perplexity" in summary and "Training data" in summary and "duplicate rate" in summary
    for t in result.trained:  # every score record names the training that made its checkpoint
        sc = next(s for s in result.scored if (s.method, s.seed) == (t.method, t.seed))
        record = json.loads((tmp_path / "study" / "runs" / sc.run_id / "record.json").read_text())
        manifest = json.loads((t.checkpoint / "ctxbench_manifest.json").read_text())
        assert record["training"]["run_id"] == t.run_id == manifest["run_id"]
        assert record["training"]["config_hash"] == manifest["config_hash"] and record["training"]["data_hash"] == t.data_hash
        assert record["training"]["base_model"] == "scratch-llama"
    assert res["heldout"]["documents"] == 3

    before = weights(tmp_path / "study")
    console = Console(file=io.StringIO(), width=200)
    again = run_study(study, data_dir=data_dir, console=console)  # everything is complete: no packing, training or scoring
    log = console.file.getvalue()
    assert weights(tmp_path / "study") == before and [s.run_id for s in again.scored] == [s.run_id for s in result.scored]
    assert "training (cpt)" not in log and log.count("already trained") == 4 and "scoring" not in log


@pytest.mark.slow
def test_a_changed_packing_trains_anew_and_overwrites_nothing(tmp_path, data_dir):
    """The issue's stale-checkpoint case through a study: only the packing budget changes between two runs."""
    from rich.console import Console

    raw = {**TINY, "out_dir": str(tmp_path / "study"), "seeds": [0]}
    result = run_study(load_study(_write(tmp_path, raw)), data_dir=data_dir, console=Console(file=io.StringIO()))
    before = weights(tmp_path / "study")
    bigger = load_study(_write(tmp_path, {**raw, "budget_tokens": 128 * 14}))
    retrained = run_study(bigger, data_dir=data_dir, console=Console(file=io.StringIO()))
    assert weights(tmp_path / "study").items() >= before.items()  # no model was overwritten
    for old, new in zip(result.trained, retrained.trained):
        manifest = json.loads((new.checkpoint / "ctxbench_manifest.json").read_text())
        assert new.checkpoint != old.checkpoint and new.run_id != old.run_id and new.data_hash != old.data_hash
        assert manifest["steps"] == 2 and manifest["resumed_from_step"] is None
        assert weights(new.checkpoint)[new.checkpoint / "model.safetensors"] != before[old.checkpoint / "model.safetensors"]


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_cpu_stdlib_study_end_to_end(tmp_path, data_dir):
    """The shipped CPU study (SmolLM2-135M, three packings x three seeds, the untrained row, held-out perplexity and
    multi-needle NIAH): minutes, not seconds. Prints the verdicts; asserts the design and the report's parts."""
    study = load_study(REPO / "configs" / "studies" / "cpu-stdlib.yaml").model_copy(update={"out_dir": str(tmp_path / "s")})
    start = time.perf_counter()
    result = run_study(study, data_dir=data_dir)
    print(f"cpu-stdlib study: {time.perf_counter() - start:.0f}s")
    res = json.loads(result.json.read_text())
    assert len(result.trained) == 9 and {s.method for s in result.scored} == {"untrained", "standard", "splice-repo",
                                                                              "splice-bm25"}
    assert res["comparisons_in_family"] == 10  # (3 vs untrained + 2 vs standard) x (task score, held-out perplexity)
    niah = [c for c in res["comparisons"] if c["measure"] == "task score"]
    assert all(c["n_pairs"] == 5 for c in niah)  # 5 depths at 384 tokens
    ppl = [c for c in res["comparisons"] if c["measure"] == "ppl/heldout-full"]
    assert all(c["n_pairs"] == 16 for c in ppl)  # 8 held-out files x 2 lengths
    summary = result.summary.read_text()
    print(summary)
    assert "Verdicts" in summary and "dequantized from the GGUF file" in summary
