"""Sequence parallelism (DeepSpeed-Ulysses through transformers and accelerate) on CPU over gloo: 2 processes sharing
each sequence (`sequence_parallel: 2`) train what 1 process trains alone, under the same ZeRO-3 config: the same loss
and gradient norm at every step and the same final weights, within float tolerance. Hierarchical-QA SFT (its
answer-only loss, summed over the shards and divided by the step's answer tokens) and CPT.

The refusals and the collators' position_ids run in the default tier; the trainings are slow and need deepspeed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from ctxbench.harness.core.errors import ConfigError

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


def _load(name: str):
    """A sibling test module's helpers (tests run with --import-mode=importlib: load it by path)."""
    spec = importlib.util.spec_from_file_location(f"{name}_tests", Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ddp = _load("test_ddp")
packed = ddp.packed  # module-scoped fixtures: packed CPT data, hierarchical-QA conversations
hqa_stage_data = ddp.hqa_stage_data


def grad_norms(model_dir: Path) -> list[float]:
    """The gradient norm of every optimizer step, from the last checkpoint's log history (rank 0 wrote it)."""
    last = max(model_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    history = json.loads((last / "trainer_state.json").read_text())["log_history"]
    return [float(h["grad_norm"]) for h in history if "grad_norm" in h]


def assert_same(tmp_path: Path, method: str, raw) -> None:
    """1 process (sequence_parallel 1) vs 2 processes sharing each sequence (sequence_parallel 2), both under ZeRO-3."""
    ds = _load("test_ddp_deepspeed").zero_config(tmp_path, 3)
    runs = {}
    for nproc in (1, 2):
        store = tmp_path / f"sp{nproc}"
        done = ddp.torchrun(tmp_path, method, raw(store, ds, nproc), nproc=nproc)
        assert done.returncode == 0, done.stderr[-3000:]
        [run_dir] = [p for p in store.iterdir() if p.is_dir()]
        ddp.lines_once(run_dir)
        runs[nproc] = (store, run_dir.name, done.stdout)
    (one, one_id, said_one), (two, two_id, said_two) = runs[1], runs[2]
    trained = lambda said: [line for line in said.splitlines() if line.startswith("trained ")][0].split(" in ")[0]  # noqa: E731
    assert trained(said_two) == trained(said_one)  # the same steps and tokens, counted once over the 2 shards
    # Adam's first steps move a weight by about the learning rate whatever the size of its gradient, so a weight whose
    # gradient is near 0 moves by an amount float noise decides: final weights within 1% of one step's move (5e-3)
    ddp.assert_same_training(one, one_id, two, two_id, atol=5e-5)
    norms_one, norms_two = grad_norms(one / one_id / "model"), grad_norms(two / two_id / "model")
    assert len(norms_one) == len(norms_two) > 0
    assert norms_two == pytest.approx(norms_one, rel=1e-4)


# --- the trainings (slow) ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed")
def test_hqa_sft_sequence_parallel_equals_one_process(hqa_stage_data, tmp_path):
    def raw(store: Path, ds: str, nproc: int) -> dict:
        return {"base_model": {"config": {**ddp.TINY, "max_position_embeddings": 1024}}, "store": str(store),
                "per_device_batch_size": 1, "learning_rate": 5e-3, "save_steps": 3, "threads": 1, "seed": 0,
                "lr_scheduler": "constant", "eval_samples": 0, "deepspeed": ds,
                "stages": [{"name": "s1", "data": str(hqa_stage_data), "seq_len": 1024, "max_steps": 3,
                            "sequence_parallel": nproc}]}

    assert_same(tmp_path, "hqa_sft", raw)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed")
def test_cpt_sequence_parallel_equals_one_process(packed, tmp_path):
    def raw(store: Path, ds: str, nproc: int) -> dict:
        return ddp.cpt_raw(store, packed, 1, deepspeed=ds, sequence_parallel=nproc, eval_steps=3, save_steps=3,
                           data={"path": str(packed), "eval_sequences": 0})

    assert_same(tmp_path, "cpt", raw)


# --- refusals and collators (default tier) -------------------------------------------------------------------------
@pytest.mark.parametrize(("env", "kw", "says"), [
    ({}, {"deepspeed": None}, r"^sequence_parallel: 2 needs DeepSpeed .*set deepspeed: zero3"),
    ({}, {"attn": "eager"}, r"^sequence_parallel: 2 needs attn_implementation sdpa or flash_attention_2/3, not eager$"),
    ({"WORLD_SIZE": "3"}, {}, r"^sequence_parallel: 2 does not divide the 3 launched process\(es\); .*--nproc_per_node 2"),
    ({}, {}, r"^sequence_parallel: 2 does not divide the 1 launched process\(es\)"),
    ({"WORLD_SIZE": "2"}, {"seq_len": 129}, r"^sequence_parallel: 2 does not divide the sequence length 129"),
    ({"WORLD_SIZE": "2"}, {"supported": False}, r"^sequence_parallel: trainer t has no sequence parallelism"),
    ({"WORLD_SIZE": "2"}, {"heads": (9, 3)}, r"^sequence_parallel: 2 must divide the model's 9 attention heads"),
    ({"WORLD_SIZE": "2"}, {"heads": (4, 3)}, r"and divide or be a multiple of its 3 key/value heads"),
])
def test_a_degree_that_cannot_run_is_refused_in_one_line(monkeypatch, env, kw, says):
    from ctxbench.trainers.distributed import check_sequence_parallel

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = {"deepspeed": "zero3", "attn": "sdpa", "seq_len": 128, "trainer": "t", **kw}
    with pytest.raises(ConfigError, match=says):
        check_sequence_parallel(2, **args)
    monkeypatch.setenv("WORLD_SIZE", "2")
    check_sequence_parallel(2, deepspeed="zero3", attn="sdpa", seq_len=128, trainer="t")  # what runs
    check_sequence_parallel(2, deepspeed="zero3", attn="sdpa", seq_len=128, trainer="t", heads=(4, 1))  # KV heads copied


def test_hqa_refuses_before_any_data_is_made_and_the_degree_is_no_part_of_the_run_id(tmp_path, monkeypatch):
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    stage = {"name": "s1", "data": str(tmp_path / "nowhere.yaml"), "seq_len": 1024, "sequence_parallel": 2}
    with pytest.raises(Exception, match="sequence_parallel are per stage"):
        HQASFTConfig(base_model="smollm2-135m", stages=[stage], sequence_parallel=2)
    from ctxbench.trainers.cpt import CPTConfig

    base = {"base_model": {"config": ddp.TINY}, "data": {"path": "p"}}
    assert CPTConfig(**base).config_hash() == CPTConfig(**base, sequence_parallel=2).config_hash()
    monkeypatch.setattr("ctxbench.trainers.hqa.trainer.data_identity", lambda data, args: "x")
    trainer = HQASFTTrainer(HQASFTConfig(base_model="smollm2-135m", store=str(tmp_path / "runs"), stages=[stage]))
    with pytest.raises(ConfigError, match=r"^stages\.s1\.sequence_parallel: 2 needs DeepSpeed"):
        trainer.train()
    assert not (tmp_path / "runs").exists()


def test_collators_give_global_positions_and_pad_to_one_length():
    from ctxbench.trainers.cpt import collate_packed
    from ctxbench.trainers.hqa.loss import pad_collator

    cpt = collate_packed([{"input_ids": np.arange(6)}, {"input_ids": np.arange(6) + 9}])
    assert cpt["position_ids"].tolist() == [list(range(6))] * 2
    rows = [{"input_ids": np.arange(5, dtype=np.int32), "labels": np.array([-100, -100, 7, 8, 9], dtype=np.int32)},
            {"input_ids": np.arange(3, dtype=np.int32), "labels": np.array([-100, 4, 5], dtype=np.int32)}]
    batch = pad_collator(0, 8)(rows)
    assert batch["input_ids"].shape == (2, 8) and batch["position_ids"].tolist() == [list(range(8))] * 2
    assert batch["labels"][0, 5:].tolist() == [-100] * 3 and batch["attention_mask"][1].tolist() == [1] * 3 + [0] * 5
    assert pad_collator(0)(rows)["input_ids"].shape == (2, 5)
