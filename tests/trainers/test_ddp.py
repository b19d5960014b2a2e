"""Data-parallel training under torchrun on CPU (gloo): 2 processes with B/2 sequences each train the same model as
1 process with B (the same loss curve and final weights within float tolerance); rank 0 alone writes each loss line,
the record and the checkpoint; tokens are counted over all ranks; resuming with another process count is refused.

The 2-process runs are real `torchrun ... ctxbench train` subprocesses; the 1-process reference trains in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import MANIFEST_NAME, TrainRun

SEQ = 128
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "tie_word_embeddings": True}


def torchrun(cwd: Path, method: str, raw: dict, nproc: int = 2) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node N -m ctxbench.harness.cli train METHOD --config FILE` as a user types it."""
    path = cwd / f"{method}-{nproc}.yaml"
    path.write_text(yaml.safe_dump(raw))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "ctxbench.harness.cli", "train", method, "--config", str(path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)


def weights(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def assert_same_training(store_one: Path, run_one: str, store_two: Path, run_two: str, *, rtol: float = 1e-4,
                         atol: float = 1e-5) -> None:
    """The same loss at every logged step and split, and the same final weights, within float tolerance."""
    one, two = TrainRun(store_one, run_one).losses(), TrainRun(store_two, run_two).losses()
    assert [(r["split"], r["step"], r["tokens"]) for r in one] == [(r["split"], r["step"], r["tokens"]) for r in two]
    for a, b in zip(one, two):
        assert b["loss"] == pytest.approx(a["loss"], rel=rtol), (a, b)
    wa, wb = weights(store_one / run_one / "model"), weights(store_two / run_two / "model")
    assert wa.keys() == wb.keys()
    worst = max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)
    assert worst < atol, f"final weights differ by {worst}"


def lines_once(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "losses.jsonl").read_text().splitlines()]
    twice = [k for k, n in Counter((r["split"], r["step"]) for r in rows).items() if n > 1]
    assert not twice, f"loss lines written more than once: {twice}"
    return rows


# --- CPT -----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Path:
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    root = tmp_path_factory.mktemp("packed")
    corpus = resolve_corpus({"path": "stdlib:json"}, root)
    synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=SEQ, budget_tokens=SEQ * 24,
                               tokenizer="smollm2-135m", seed=0, out_dir=str(root / "standard")))
    return root / "standard"


def cpt_raw(store: Path, packed: Path, batch: int, **kw) -> dict:
    return {"base_model": {"config": TINY}, "store": str(store), "max_steps": 3, "per_device_batch_size": batch,
            "learning_rate": 5e-3, "warmup_steps": 1, "save_steps": 2, "eval_steps": 2, "threads": 1, "seed": 0,
            "data": {"path": str(packed), "eval_sequences": 4}, **kw}


@pytest.fixture(scope="module")
def cpt_two_ranks(tmp_path_factory, packed):
    """CPT over 2 ranks with 2 sequences each (global batch 4), 3 steps."""
    cwd = tmp_path_factory.mktemp("ddp-cpt")
    done = torchrun(cwd, "cpt", cpt_raw(cwd / "runs", packed, 2))
    assert done.returncode == 0, done.stderr[-3000:]
    return cwd, done


def test_two_ranks_train_one_model_equal_to_one_process_with_the_whole_batch(cpt_two_ranks, packed, tmp_path):
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

    cwd, done = cpt_two_ranks
    said = [line for line in done.stdout.splitlines() if line.startswith("trained ")]
    assert said == [f"trained 3 steps, {3 * 4 * SEQ:,} tokens" + said[0].split("tokens")[1]]  # once, over both ranks
    [run_dir] = [p for p in (cwd / "runs").iterdir() if p.is_dir()]
    rows = lines_once(run_dir)
    assert [r["tokens"] for r in rows if r["split"] == "train"] == [4 * SEQ, 8 * SEQ, 12 * SEQ]
    manifest = json.loads((run_dir / "model" / MANIFEST_NAME).read_text())
    assert manifest["tokens"]["trained"] == 12 * SEQ and manifest["steps"] == 3
    assert json.loads((run_dir / "record.json").read_text())["status"] == "complete"
    assert sorted(p.name for p in (run_dir / "model").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]

    one = CPTTrainer(CPTConfig(**cpt_raw(tmp_path / "runs", packed, 4))).train()
    assert one.tokens == 12 * SEQ
    assert_same_training(tmp_path / "runs", one.run_id, cwd / "runs", run_dir.name)


def test_resuming_two_rank_checkpoints_in_one_process_is_refused(cpt_two_ranks, packed, tmp_path):
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

    cwd, _ = cpt_two_ranks
    shutil.copytree(cwd / "runs", tmp_path / "runs")
    [run_dir] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    (run_dir / "model" / MANIFEST_NAME).unlink()  # unfinished: a rerun would resume from checkpoint-3
    with pytest.raises(ConfigError, match=r"trained by 2 process\(es\) \(global batch 4\), this launch has 1 .*"
                                          r"torchrun --nproc_per_node 2.*--fresh"):
        CPTTrainer(CPTConfig(**cpt_raw(tmp_path / "runs", packed, 2))).train()


def test_replicas_are_refused_before_anything_is_written(monkeypatch, tmp_path, packed):
    from ctxbench.trainers.distributed import distributed_arguments

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match=r"^extra_args.use_cpu: false with 2 processes and no GPU would train 2 "):
        distributed_arguments({"use_cpu": False}, has_cuda=False)
    kw = distributed_arguments({}, has_cuda=False)
    assert kw["use_cpu"] is True and kw["ddp_backend"] == "gloo"
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:  # with it, DeepSpeed trains on the CPU (test_ddp_deepspeed.py)
        with pytest.raises(ConfigError, match=r"^deepspeed: the deepspeed package is not installed"):
            distributed_arguments({"deepspeed": "zero3.json"}, has_cuda=False)
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed_arguments({}, has_cuda=False) == {}


# --- LOGO and hierarchical-QA SFT ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_logo_two_ranks_equal_one_process(logo_data, tmp_path):
    from ctxbench.trainers.logo.trainer import LogoConfig, LogoTrainer

    def raw(store: Path, batch: int) -> dict:
        return {"base_model": {"config": {**TINY, "max_position_embeddings": 4096}}, "store": str(store), "max_steps": 2,
                "per_device_batch_size": batch, "learning_rate": 2e-3, "warmup_steps": 0, "save_steps": 2,
                "eval_steps": 2, "threads": 1, "seed": 0, "lora": {"r": 4, "alpha": 8},
                "data": {"path": str(logo_data), "eval_samples": 4, "max_samples": 12}}

    one = LogoTrainer(LogoConfig(**raw(tmp_path / "one", 4))).train()
    done = torchrun(tmp_path, "logo", raw(tmp_path / "two", 2))
    assert done.returncode == 0, done.stderr[-3000:]
    [run_dir] = [p for p in (tmp_path / "two").iterdir() if p.is_dir()]
    lines_once(run_dir)
    assert_same_training(tmp_path / "one", one.run_id, tmp_path / "two", run_dir.name)


@pytest.fixture(scope="module")
def hqa_stage_data(tmp_path_factory, smol_tokenizer, data_dir) -> Path:
    """4 one-document conversations (<= 1024 tokens) from the data tests' deterministic stub generator."""
    import importlib.util

    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.trainers.data.synthesis import synthesize
    from ctxbench.trainers.hqa.data import HQADataConfig
    from ctxbench.trainers.hqa.generate import Generator

    spec = importlib.util.spec_from_file_location("hqa_data_tests", Path(__file__).with_name("test_hqa_data.py"))
    stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stubs)
    root = tmp_path_factory.mktemp("hqa")
    cfg = HQADataConfig(documents={"path": str(data_dir / "squad/dev-v2.0.json"), "max_documents": 4},
                        tokenizer="smollm2-135m", generator={"model": "smollm2-135m", "max_new_tokens": 32},
                        small_tokens=128, medium_tokens=384, hierarchical_per_document=3, diverse_per_document=4,
                        documents_per_sample=1, target_tokens=1024, samples=4, composition={"n1": 2, "n2": 2, "n3": 1},
                        out_dir=str(root / "s1"), cache_dir=str(root / "cache"))
    gen = Generator(cfg.generator, root / "cache", max_retries=cfg.max_retries)
    gen._backend, gen._renderer = stubs.StubBackend(smol_tokenizer), PromptRenderer(smol_tokenizer, "chat")
    synthesize("hqa", cfg, generator=gen)
    return root / "s1"


@pytest.mark.slow
def test_hqa_sft_two_ranks_equal_one_process(hqa_stage_data, tmp_path):
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

    def raw(store: Path, batch: int) -> dict:
        return {"base_model": {"config": {**TINY, "max_position_embeddings": 1024}}, "store": str(store),
                "per_device_batch_size": batch, "learning_rate": 5e-3, "save_steps": 2, "threads": 1, "seed": 0,
                "lr_scheduler": "constant", "eval_samples": 0,
                "stages": [{"name": "s1", "data": str(hqa_stage_data), "seq_len": 1024, "max_steps": 2}]}

    one = HQASFTTrainer(HQASFTConfig(**raw(tmp_path / "one", 2))).train()
    done = torchrun(tmp_path, "hqa_sft", raw(tmp_path / "two", 1))
    assert done.returncode == 0, done.stderr[-3000:]
    [run_dir] = [p for p in (tmp_path / "two").iterdir() if p.is_dir()]
    lines_once(run_dir)
    assert_same_training(tmp_path / "one", one.run_id, tmp_path / "two", run_dir.name)
