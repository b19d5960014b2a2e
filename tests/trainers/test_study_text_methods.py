"""Issue 23: a synthesis method declares what it produces; cpt packs and trains on a method's text rows, so a study
compares any text-producing method (a plugin's) head to head with the packings; others are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from ctxbench.harness.core import registry
from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import StudyInputs
from ctxbench.trainers.cpt import CPTStudyData, CPTTrainer
from ctxbench.trainers.data import synthesis
from ctxbench.trainers.data.corpus import open_corpus


class RowsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rows: int = 3
    seed: int = 0
    out_dir: str


def _write_rows(cfg: RowsConfig, ident: synthesis.Identity) -> dict:
    """Test method: `rows` text rows in one shard."""
    out = Path(cfg.out_dir)
    manifest = {**synthesis.envelope("rows", ident), "shards": []}
    text = "".join(json.dumps({"text": f"row {i} of seed {cfg.seed}"}) + "\n" for i in range(cfg.rows))
    synthesis.list_shard(out, manifest, "shard-00000.jsonl", {"": text})
    return synthesis.finish(out, manifest)


@pytest.fixture
def methods(monkeypatch):
    """Two test methods in the registry for this test only: `rows` (produces text) and `silent` (declares nothing)."""
    synthesis.synthesis_names()  # the registry loaded first, so the test entries are not overwritten

    def ident(cfg, **_):
        return synthesis.identity(cfg.model_dump(exclude={"out_dir"}))

    for name, produces, trainer in (("rows", "text", "cpt"), ("silent", None, None)):
        spec = synthesis.SynthesisMethod(name, RowsConfig, ident, _write_rows, synthesis.read_manifest, "test", None,
                                         produces=produces, trainer=trainer)
        monkeypatch.setitem(registry._REGISTRY["synthesis"], name, spec)


def test_every_builtin_method_declares_what_it_produces_and_its_trainer():
    declared = {n: (synthesis.get_synthesis(n).produces, synthesis.get_synthesis(n).trainer)
                for n in synthesis.synthesis_names()}
    assert declared["standard"] == declared["splice"] == ("packed", "cpt")
    assert (declared["hqa"], declared["logo"]) == (("hqa", "hqa_sft"), ("logo", "logo"))


def test_a_method_that_declares_nothing_is_refused_naming_the_fix(methods):
    with pytest.raises(ValidationError, match=r"'silent' declares no `produces`.*declare it in register_synthesis "
                                              r"\(produces='text'"):
        CPTStudyData(method="silent")


def test_hqa_is_refused_naming_its_trainer():
    with pytest.raises(ValidationError, match="'hqa' is a synthesis method producing hqa data.*trainer: hqa_sft"):
        CPTStudyData(method="hqa")


def test_the_study_sets_out_dir_and_seed_and_refuses_them_in_method_args(methods):
    with pytest.raises(ValidationError, match="method_args: seed is set by the study; remove it"):
        CPTStudyData(method="rows", method_args={"seed": 3})
    with pytest.raises(ValidationError, match=r"method_args \(rows\)"):
        CPTStudyData(method="rows", method_args={"rowz": 3})
    with pytest.raises(ValidationError, match="mix_ratio: a text method"):
        CPTStudyData(method="rows", mix_ratio=0.5)


def test_a_text_method_is_run_then_standard_packed(methods, tmp_path: Path):
    inputs = StudyInputs({"path": "corpus"}, "tok", 128, 1024, 7, tmp_path / "d", None)
    data = CPTTrainer.study_data_config(CPTStudyData(method="rows", method_args={"rows": 5}), inputs)
    assert data["text_synthesis"] == {"method": "rows", "config": {"rows": 5, "out_dir": str(tmp_path / "d" / "text"),
                                                                   "seed": 7}}
    s = data["synthesis"]
    assert s["method"] == "standard" and s["corpus"] == {"path": str(tmp_path / "d" / "text"), "format": "synthesis"}
    assert s["out_dir"] == str(tmp_path / "d" / "packed") and s["seed"] == 7


def test_a_text_output_is_a_corpus_whose_identity_is_the_method_output(methods, tmp_path: Path):
    out = tmp_path / "text"
    with pytest.raises(ConfigError, match="holds no synthesis output"):
        open_corpus({"path": str(tmp_path), "format": "synthesis"}).files()
    synthesis.synthesize("rows", RowsConfig(rows=3, out_dir=str(out)))
    corpus = open_corpus({"path": str(out)})  # detected from the manifest
    assert corpus.format == "synthesis"
    assert [(d.doc_id, d.text) for d in corpus.documents()] == [(f"shard-00000.jsonl:{i + 1}", f"row {i} of seed 0")
                                                                 for i in range(3)]
    assert corpus.identity["synthesis"] == synthesis.read_manifest(out)["identity"]["hash"]
    manifest = synthesis.read_manifest(out)
    (out / "manifest.json").write_text(json.dumps({**manifest, "complete": False}))
    with pytest.raises(ConfigError, match="the rows synthesis is unfinished; rerun it"):
        open_corpus({"path": str(out)}).files()
    (out / "manifest.json").write_text(json.dumps({**manifest, "shards": ["shard-00000.npy"]}))
    with pytest.raises(ConfigError, match="is rows output, not JSON-lines text shards"):
        open_corpus({"path": str(out)}).files()


def test_data_methods_says_what_each_method_produces(methods, ctxbench, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = ctxbench("data", "methods")
    assert code == 0
    rows: dict[str, str] = {}
    name = ""
    for line in (x for x in out.splitlines() if x.startswith("│")):  # a wrapped cell continues under an empty name
        name = line.split("│")[1].strip() or name
        rows[name] = " ".join((rows.get(name, "") + " " + line.replace("│", " ")).split())
    assert "· produces packed" in rows["standard"] and "· produces text" in rows["rows"]
    assert "· produces nothing declared (no study can train on it)" in rows["silent"]
