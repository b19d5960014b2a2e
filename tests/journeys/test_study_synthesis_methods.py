"""Journey (issue 23): a study compares synthesis methods head to head through the trainers that train on their data
(packings and methods producing text: cpt; hqa: hqa_sft; logo: logo). A user who names hqa as the data method
of a cpt study method is told, in one line and before anything is written, which trainer takes it; before, the
study said "unknown packing method 'hqa'" as if hqa did not exist. A plugin's method that produces text rows
(the plugin example's example_sentences) is compared with the standard packing by a study config alone: before, it
was refused as "not a packing"."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .test_study_journeys import STUDY as TINY_STUDY

STUDY = """name: st
corpus: {path: "stdlib:json", format: repo}
methods:
  - {name: std, data: {method: standard}}
  - {name: qa, data: {method: hqa}}
reference: std
budget_tokens: 2048
seq_len: 256
base_model: smollm2-135m
training: {max_steps: 1}
eval: {suite: ruler-quick}
"""


def test_a_cpt_study_method_naming_hqa_is_told_its_trainer(user_in_process):
    user = user_in_process  # a refusal: the CLI in process
    (user.cwd / "st.yaml").write_text(STUDY)
    r = user.run("ctxbench study st.yaml")
    assert r.code == 2, r.err[-2000:]
    assert r.err.strip().splitlines() == [r.last_err_line]
    assert r.last_err_line == ("error: st.yaml: methods.qa.data: method: 'hqa' is a synthesis method producing hqa data, "
                               "and cpt trains on packed sequences (packings: iclm, knn, quest, splice, standard, "
                               "within_domain; or a method producing text); give this study method trainer: hqa_sft")
    assert user.files() == {"st.yaml"}


PLUGIN_STUDY = TINY_STUDY.replace("name: tiny", "name: heads").replace("reference: a", "reference: std").replace(
    """  - {name: a, data: {method: standard, eval_sequences: 2}}
  - {name: b, data: {method: standard, eval_sequences: 2}}""",
    """  - {name: std, data: {method: standard, eval_sequences: 2}}
  - {name: sentences, data: {method: example_sentences, eval_sequences: 2, method_args: {documents: DOCS, samples: 16}}}""")


@pytest.fixture(scope="module")
def plugin_env(plugin_site: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_site), os.environ.get("PYTHONPATH", "")]))}


def test_a_study_compares_a_plugin_text_method_with_a_packing(user, plugin_env, data_dir):
    assert "{name: sentences" in PLUGIN_STUDY and "reference: std" in PLUGIN_STUDY  # the tiny study's methods replaced
    (user.cwd / "heads.yaml").write_text(PLUGIN_STUDY.replace("DOCS", str(data_dir / "pg_essays")))
    r = user.run("ctxbench study heads.yaml", env=plugin_env, timeout=600)
    assert r.code == 0, r.err[-3000:]
    assert "task score: sentences − std = " in r.out
    report = json.loads((user.cwd / "runs" / "studies" / "heads" / "study.json").read_text())
    assert {(c["a"], c["b"]) for c in report["comparisons"]} >= {("sentences", "std"), ("sentences", "untrained")}
    data = next((user.cwd / "runs" / "studies" / "heads" / "data" / "sentences").iterdir())
    text = json.loads((data / "text" / "manifest.json").read_text())  # the plugin's method ran through the one core
    assert text["method"] == "example_sentences" and text["complete"] and text["samples"] == 16
    packed = json.loads((data / "packed" / "manifest.json").read_text())  # its rows standard-packed, traced to it
    assert packed["method"] == "standard" and packed["config"]["corpus"]["format"] == "synthesis"
    assert packed["num_sequences"] == 1024 // 128
