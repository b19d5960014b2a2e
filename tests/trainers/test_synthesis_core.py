"""The one synthesis core and generator client: one fingerprint rule, reuse or refuse naming what differs, Quest's
queries through the client."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.data.generator import GeneratorConfig, fingerprint
from ctxbench.trainers.data.synthesis import SCHEMA, check_out_dir, identity

BLOCK = {"model": "smollm2-135m", "backend": "hf", "backend_args": {"dtype": "float32"}, "max_new_tokens": 24,
         "template": "chat"}


def test_one_fingerprint_rule_for_every_method():
    from ctxbench.trainers.hqa.data import HQADataConfig
    from ctxbench.trainers.logo.data import LogoDataConfig

    base = fingerprint(GeneratorConfig(**BLOCK))
    faster = {**BLOCK, "batch_size": 4, "backend_args": {"dtype": "float32", "threads": 7, "device": "cpu", "timeout": 9}}
    assert fingerprint(GeneratorConfig(**faster)) == base  # how calls run cannot change a reply
    for change in ({"backend_args": {"dtype": "bfloat16"}}, {"max_new_tokens": 25}, {"template": "plain"},
                   {"backend": "vllm"}):
        assert fingerprint(GeneratorConfig(**{**BLOCK, **change})) != base, change
    # hqa and logo read the same block into the same model, so the same generator change invalidates both alike
    hqa = HQADataConfig(documents={"path": "x"}, tokenizer="t", generator=faster, target_tokens=64, samples=1, out_dir="o")
    logo = LogoDataConfig(target_window=64, generator=faster)
    assert type(hqa.generator) is type(logo.generator) is GeneratorConfig
    assert fingerprint(hqa.generator) == fingerprint(logo.generator) == base
    assert LogoDataConfig(target_window=64, generator={"model": "m"}).generator.max_new_tokens == 64  # logo's default


def test_an_out_dir_holds_one_identity_and_a_refusal_names_what_differs(tmp_path):
    mine = identity({"k": 1}, ["file", 10], "fp")
    assert check_out_dir(tmp_path, mine) is None
    (tmp_path / "manifest.json").write_text(json.dumps({"schema": SCHEMA, "identity": mine.as_dict(), "complete": True}))
    assert check_out_dir(tmp_path, mine)["complete"]
    for other, what in ((identity({"k": 2}, ["file", 10], "fp"), "another config"),
                        (identity({"k": 1}, ["file", 11], "fp"), "another input data"),
                        (identity({"k": 1}, ["file", 10], "fp2"), "another generator")):
        with pytest.raises(ConfigError, match=f"holds a synthesis of {what}; use another out_dir or delete it"):
            check_out_dir(tmp_path, other)
    (tmp_path / "manifest.json").write_text(json.dumps({"complete": True, "config_hash": "abc"}))
    with pytest.raises(ConfigError, match="written by an older ctxbench"):
        check_out_dir(tmp_path, mine)


def test_quest_queries_from_a_generator_go_through_the_client(tmp_path, smol_tokenizer):
    from ctxbench.trainers.data.methods import parse_args
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from tests.trainers.conftest import FakeGenerator

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(stdlib / "json", tmp_path / "repo" / "json", ignore=shutil.ignore_patterns("__pycache__"))
    args = {"query_generator": {"model": "smollm2-135m", "backend": "logo-fake"}, "max_segments": 1, "min_keyword_score": 1}

    def pack(name):
        cfg = SynthesisConfig(corpus={"path": str(tmp_path / "repo"), "format": "repo", "max_doc_tokens": 256},
                              method="quest", method_args=args, seq_len=256, budget_tokens=512, tokenizer="smollm2-135m",
                              out_dir=str(tmp_path / name), cache_dir=str(tmp_path / "cache"))
        return synthesize(cfg, tokenizer=smol_tokenizer)

    before = FakeGenerator.calls
    assert pack("a").complete
    asked = FakeGenerator.calls - before
    calls = list((tmp_path / "cache").rglob("quest-calls/*.jsonl"))
    assert asked > 0 and len(calls) == 1 and len(calls[0].read_text().splitlines()) == asked
    for keywords in (tmp_path / "cache").rglob("quest-keywords-*.jsonl"):
        keywords.unlink()  # the keywords are computed again: every query comes from the call cache
    assert pack("b").complete and FakeGenerator.calls - before == asked
    with pytest.raises(ConfigError, match="query_model .* or query_generator, not both"):
        parse_args("quest", {**args, "query_model": "some/dir"})
