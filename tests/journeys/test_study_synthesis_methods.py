"""Journey (issue 23): a study compares synthesis methods head to head through the trainers that train on their data
(packings: cpt; hqa: hqa_sft; logo: logo; a plugin's: the plugin's trainer). A user who names hqa as the data method
of a cpt study method is told, in one line and before anything is written, which trainer takes it; before, the
study said "unknown packing method 'hqa'" as if hqa did not exist."""

from __future__ import annotations

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


def test_a_cpt_study_method_naming_hqa_is_told_its_trainer(user):
    (user.cwd / "st.yaml").write_text(STUDY)
    r = user.run("ctxbench study st.yaml")
    assert r.code == 2, r.err[-2000:]
    assert r.err.strip().splitlines() == [r.last_err_line]
    assert r.last_err_line == ("error: st.yaml: methods.qa.data: method: 'hqa' is a synthesis method but not a packing, "
                               "and cpt trains on packed sequences (iclm, knn, quest, splice, standard, within_domain); "
                               "give this study method trainer: hqa_sft")
    assert user.files() == {"st.yaml"}
