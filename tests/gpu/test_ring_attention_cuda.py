"""Ring attention (`sequence_parallel: {ring: 2}`, torch context parallelism under FSDP2) over 2 GPUs trains what 1
GPU trains alone: the same loss at every step, gradient norms and final weights, for CPT and hierarchical-QA SFT
(fp32, so the comparison is not bf16 rounding). Needs 2 CUDA GPUs: torch's own CUDA ring kernels (flash,
memory-efficient, cuDNN). The same trainings run on the CPU tier over gloo with torch's ring and its CPU kernel
(trainers/ring_cpu.py; tests/trainers/test_ring_cpu.py, 2 and 4 processes); the refusals, arguments and plan are in
tests/trainers/test_ring_attention.py. Never run yet: no machine with 2 GPUs has been lent. LOGO refuses sequence
parallelism (its ~10K-token sequences fit one GPU).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ctxbench.trainers.base import TrainRun

pytestmark = pytest.mark.gpu
TESTS = Path(__file__).resolve().parents[1]
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "tie_word_embeddings": True}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def two_gpus() -> bool:
    import torch

    return torch.cuda.device_count() >= 2


def grad_norms(model_dir: Path) -> list[float]:
    last = max(model_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return [float(h["grad_norm"]) for h in json.loads((last / "trainer_state.json").read_text())["log_history"]
            if "grad_norm" in h]


def assert_ring_equals_one_gpu(tmp_path: Path, method: str, raw) -> None:
    ddp = _load("ddp_tests", TESTS / "trainers" / "test_ddp.py")
    runs = {}
    for nproc, sp in ((1, 1), (2, {"ring": 2})):
        store = tmp_path / f"ring{nproc}"
        done = ddp.torchrun(tmp_path, method, raw(store, sp), nproc=nproc)
        assert done.returncode == 0, done.stderr[-3000:]
        [run_dir] = [p for p in store.iterdir() if p.is_dir()]
        runs[nproc] = (store, run_dir.name)
    (one, one_id), (two, two_id) = runs[1], runs[2]
    ring = _load("ring_cpu_tests", TESTS / "trainers" / "test_ring_cpu.py")
    a, b = TrainRun(one, one_id).losses(), TrainRun(two, two_id).losses()
    assert [(r["split"], r["step"], r["tokens"]) for r in a] == [(r["split"], r["step"], r["tokens"]) for r in b]
    assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-3)
    ring.assert_same_weights(one / one_id / "model", two / two_id / "model", atol=5e-5)  # the same names: no tied head saved twice
    assert grad_norms(two / two_id / "model") == pytest.approx(grad_norms(one / one_id / "model"), rel=1e-3)


@pytest.mark.skipif(not two_gpus(), reason="ring attention over 2 processes needs 2 CUDA GPUs")
def test_cpt_ring_over_two_gpus_equals_one(tmp_path, tokenizer_dir):
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    corpus = resolve_corpus({"path": "stdlib:json"}, tmp_path)
    synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=256, budget_tokens=256 * 8,
                               tokenizer=tokenizer_dir, seed=0, out_dir=str(tmp_path / "packed")))

    def raw(store: Path, sp) -> dict:
        return {"base_model": {"config": TINY, "tokenizer": tokenizer_dir}, "store": str(store), "precision": "fp32",
                "max_steps": 3, "per_device_batch_size": 1, "learning_rate": 5e-3, "lr_scheduler": "constant",
                "save_steps": 3, "seed": 0, "sequence_parallel": sp, "data": {"path": str(tmp_path / "packed"),
                                                                             "eval_sequences": 0}}

    assert_ring_equals_one_gpu(tmp_path, "cpt", raw)


@pytest.mark.skipif(not two_gpus(), reason="ring attention over 2 processes needs 2 CUDA GPUs")
def test_hqa_sft_ring_over_two_gpus_equals_one(tmp_path, tokenizer_dir, tokenizer, data_dir):
    from ctxbench.trainers.data.synthesis import synthesize
    from ctxbench.trainers.hqa.data import HQADataConfig

    stubs = _load("hqa_data_tests", TESTS / "trainers" / "test_hqa_data.py")
    data = HQADataConfig(documents={"path": str(data_dir / "squad/dev-v2.0.json"), "max_documents": 2}, tokenizer=tokenizer_dir,
                         generator={"model": tokenizer_dir, "max_new_tokens": 32}, small_tokens=128, medium_tokens=384,
                         hierarchical_per_document=3, diverse_per_document=4, documents_per_sample=1, target_tokens=1024,
                         samples=4, composition={"n1": 2, "n2": 2, "n3": 1}, out_dir=str(tmp_path / "hqa"),
                         cache_dir=str(tmp_path / "cache"))
    synthesize("hqa", data, generator=stubs.stub_generator(data, tokenizer))

    def raw(store: Path, sp) -> dict:
        return {"base_model": {"config": {**TINY, "max_position_embeddings": 1024}, "tokenizer": tokenizer_dir},
                "store": str(store), "precision": "fp32", "per_device_batch_size": 1, "learning_rate": 5e-3,
                "lr_scheduler": "constant", "save_steps": 3, "seed": 0, "eval_samples": 0,
                "stages": [{"name": "s1", "data": str(tmp_path / "hqa"), "seq_len": 1024, "max_steps": 3,
                            "sequence_parallel": sp}]}

    assert_ring_equals_one_gpu(tmp_path, "hqa_sft", raw)
