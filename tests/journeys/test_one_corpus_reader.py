"""Journey (issue 23, the data flow): every data method reads its documents through the one corpus reader
(trainers/data/corpus.py), so a document file one method reads, every method reads the same way.

A user who synthesized hierarchical-QA conversations from SQuAD articles packs the same file for continued
pretraining: `ctxbench data pack` sees a SQuAD file (format auto) as hqa does, one document per article, ids by title.
Before the one reader, the packings read it as JSON lines and refused it ("corpus.text_field: 'text' missing").
The default tier's commands here run in process (`user_in_process`).
"""

from __future__ import annotations

import json


def test_data_pack_reads_squad_articles_as_hqa_does(user_in_process, data_dir):
    squad = data_dir / "squad" / "dev-v2.0.json"
    (user_in_process.cwd / "squad.yaml").write_text(f"corpus: {{path: {squad}, max_docs: 6}}\nmethod: standard\nseq_len: 256\n"
                                         "budget_tokens: 1024\ntokenizer: smollm2-135m\nout_dir: packed/squad\n")
    r = user_in_process.run("ctxbench data pack --config squad.yaml")
    assert r.code == 0, r.err[-2000:]
    assert "standard: 4 sequences x 256 = 1,024 tokens" in r.out
    manifest = json.loads((user_in_process.cwd / "packed" / "squad" / "manifest.json").read_text())
    assert manifest["stats"]["corpus"]["docs"] == 6
    assert manifest["identity"]["inputs"]  # the corpus identity, format squad, is part of the data's identity
