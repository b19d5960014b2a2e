"""Diagnostics (Zipf burstiness, in-sequence similarity, duplicates) and the `ctxbench data` CLI."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ctxbench.harness.cli import app
from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.data.diagnostics import inspect, split_docs, zipf_coefficient
from ctxbench.trainers.data.pipeline import load_config

SRC = Path(sysconfig.get_paths()["stdlib"]) / "email"


def test_zipf_coefficient_recovers_the_exponent():
    ranks = np.arange(1, 301)
    counts = np.round(5000 * ranks ** -1.3).astype(int)
    seq = np.repeat(np.arange(300), counts)
    assert zipf_coefficient(np.random.default_rng(0).permutation(seq)) == pytest.approx(1.3, abs=0.05)
    flat = np.repeat(np.arange(300), 10)
    assert zipf_coefficient(flat) == pytest.approx(0.0, abs=1e-6)


def test_split_docs_at_separators():
    seq = np.array([5, 6, 7, 8, 9, 10, 11, 12, 2, 1, 20, 21, 22, 23, 24, 25, 26, 27, 2, 1, 30])
    docs = split_docs(seq, {1, 2}, min_tokens=3)
    assert [d.tolist() for d in docs] == [[5, 6, 7, 8, 9, 10, 11, 12], [20, 21, 22, 23, 24, 25, 26, 27]]


def write_config(tmp_path: Path, name: str, method: str, args: dict, **extra) -> Path:
    cfg = {"corpus": {"path": str(SRC), "max_doc_tokens": 256}, "method": method, "method_args": args,
           "seq_len": 1024, "budget_tokens": 24 * 1024, "tokenizer": "smollm2-135m", "out_dir": str(tmp_path / name),
           "cache_dir": str(tmp_path / "cache"), **extra}
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def test_cli_pack_and_inspect(tmp_path, smol_tokenizer, monkeypatch):
    monkeypatch.setitem(__import__("ctxbench.trainers.data.pipeline").trainers.data.pipeline._TOKENIZERS, "smollm2-135m", smol_tokenizer)
    runner = CliRunner()
    for name, method, args in [("std", "standard", {}), ("splice", "splice", {"retriever": "bm25"})]:
        res = runner.invoke(app, ["data", "pack", "--config", str(write_config(tmp_path, name, method, args))])
        assert res.exit_code == 0, res.output
        assert "24 sequences" in res.output
    out = tmp_path / "diag.json"
    res = runner.invoke(app, ["data", "inspect", str(tmp_path / "std"), str(tmp_path / "splice"), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "doc_similarity" in res.output and "zipf" in res.output
    std, splice = (r["report"] for r in json.loads(out.read_text()))
    for rep in (std["standard"], splice["splice"]):
        assert rep["sequences"] == 24 and rep["tokens"] == 24 * 1024 and rep["zipf"]["n"] == 24
        assert 0 < rep["zipf"]["mean"] < 3
    assert splice["splice"]["doc_similarity"]["mean"] > std["standard"]["doc_similarity"]["mean"]
    assert splice["splice"]["within_sequence_duplicates"] == 0 and splice["splice"]["duplicate_rate"] == 0.0
    assert sum(std["standard"]["domains"].values()) == pytest.approx(1.0, abs=0.01)


def test_cli_methods_lists_arguments():
    res = CliRunner().invoke(app, ["data", "methods"])
    assert res.exit_code == 0
    for word in ("splice", "quest", "iclm", "split_ratio", "cluster_size", "order"):
        assert word in res.output


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"method_args \(splice\): kk: unknown key"):
        load_config(write_config(tmp_path, "a", "splice", {"kk": 1}))
    with pytest.raises(ConfigError, match="method: unknown packing method 'splyce'; did you mean 'splice'"):
        load_config(write_config(tmp_path, "b", "splyce", {}))
    with pytest.raises(ConfigError, match="seq_len"):
        load_config(write_config(tmp_path, "c", "standard", {}, seq_len=4))
    res = CliRunner().invoke(app, ["data", "pack", "--config", str(write_config(tmp_path, "d", "quest",
                                                                                 {"split_ratio": 2}))])
    assert isinstance(res.exception, ConfigError) and "split_ratio" in str(res.exception)  # main() prints one line
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: [standard\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)


def test_inspect_without_manifest(tmp_path):
    with pytest.raises(ConfigError, match="manifest"):
        inspect(tmp_path)


def test_duplicate_rate_counts_repeated_documents_not_continuations(tmp_path, smol_tokenizer):
    """Concatenate-and-chunk packing continues documents across sequence boundaries; that is one placement. Only a
    second pass over the corpus (more budget than corpus) places documents twice."""
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.token_cache import load_corpus

    corpus = {"path": str(STDLIB_JSON), "max_doc_tokens": 100}
    size = load_corpus(load_config_corpus(corpus), smol_tokenizer, cache_root=tmp_path / "cache").num_tokens
    reports = {}
    for name, budget in (("once", size // 2), ("twice", int(size * 1.6))):
        out = tmp_path / name
        synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=256, budget_tokens=budget, tokenizer="smollm2-135m",
                                   out_dir=str(out), cache_dir=str(tmp_path / "cache")), tokenizer=smol_tokenizer)
        side = np.load(out / "shard-00000.docs.npz")
        assert side["continued"].any()  # documents do run over sequence boundaries
        reports[name] = inspect(out)["report"]["standard"]["duplicate_rate"]
        for f in out.glob("*.docs.npz"):  # an older packing without the record: inferred the same way
            with np.load(f) as z:
                kept = {k: z[k] for k in z.files if k != "continued"}
            np.savez(f, **kept)
        assert inspect(out)["report"]["standard"]["duplicate_rate"] == reports[name]
    assert reports["once"] == 0.0 and reports["twice"] > 0.3


STDLIB_JSON = Path(sysconfig.get_paths()["stdlib"]) / "json"


def load_config_corpus(raw):
    from ctxbench.trainers.data.corpus import CorpusConfig

    return CorpusConfig(**raw)
