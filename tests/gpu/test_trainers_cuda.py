"""Trainers on CUDA in bf16 with gradient checkpointing: cpt, hqa_sft and logo (LoRA) take optimizer steps on a
repeated batch with finite, falling losses; LOGO's attention mask still reaches early chunks under checkpointing."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from ctxbench.trainers.base import TrainRun

pytestmark = pytest.mark.gpu

TESTS = Path(__file__).resolve().parents[1]
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "tie_word_embeddings": True}
STEPS = 6


def load_test_module(name: str, path: Path):
    """A test helper module by path (tests run with --import-mode=importlib)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Seen:
    """A callback noting what training ran on: device, autocast precision, checkpointing, model parameter dtype."""

    def __new__(cls):
        from transformers import TrainerCallback

        class _Seen(TrainerCallback):
            info: dict = {}

            def on_step_end(self, args, state, control, model=None, **kwargs):
                if not _Seen.info:
                    p = next(model.parameters())
                    _Seen.info = {"device": p.device.type, "bf16": args.bf16, "param_dtype": str(p.dtype),
                                  "checkpointing": bool(getattr(model, "is_activation_checkpointing", False))}

        return _Seen()


def common(tmp_path: Path, tokenizer_dir: str, **model) -> dict:
    return {"base_model": {"config": {**TINY, **model}, "tokenizer": tokenizer_dir}, "store": str(tmp_path / "runs"),
            "precision": "auto", "gradient_checkpointing": True, "learning_rate": 5e-3, "lr_scheduler": "constant",
            "warmup_steps": 0, "save_steps": 100, "seed": 0}


def check_training(tmp_path: Path, run_id: str, seen) -> list[float]:
    info = type(seen).info
    assert info == {"device": "cuda", "bf16": True, "param_dtype": "torch.float32", "checkpointing": True}, info
    train = [r["loss"] for r in TrainRun(tmp_path / "runs", run_id).losses() if r["split"] == "train"]
    assert len(train) == STEPS and all(math.isfinite(x) for x in train), train
    print(f"{run_id}: train losses {[round(x, 4) for x in train]}")
    return train


def test_cpt_steps_in_bf16_with_checkpointing(tmp_path, tokenizer_dir):
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    corpus = resolve_corpus({"path": "stdlib:json"}, tmp_path)
    m = synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=256, budget_tokens=256 * 8,
                                   tokenizer=tokenizer_dir, seed=0, out_dir=str(tmp_path / "packed")))
    assert m.complete
    cfg = CPTConfig(**common(tmp_path, tokenizer_dir), max_steps=STEPS, per_device_batch_size=4,
                    data={"path": str(tmp_path / "packed"), "eval_sequences": 2, "max_sequences": 4})  # one repeated batch
    seen = Seen()
    result = CPTTrainer(cfg).train(callbacks=[seen])
    train = check_training(tmp_path, result.run_id, seen)
    assert train[-1] < train[0] - 0.5
    assert result.eval_loss is not None and math.isfinite(result.eval_loss)


def test_hqa_sft_steps_in_bf16_with_checkpointing(tmp_path, tokenizer_dir, tokenizer, data_dir):
    from ctxbench.trainers.data.synthesis import synthesize
    from ctxbench.trainers.hqa.data import HQADataConfig
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

    stubs = load_test_module("hqa_data_tests", TESTS / "trainers" / "test_hqa_data.py")
    data = HQADataConfig(documents={"path": str(data_dir / "squad/dev-v2.0.json"), "max_documents": 2}, tokenizer=tokenizer_dir,
                         generator={"model": tokenizer_dir, "max_new_tokens": 32}, small_tokens=128, medium_tokens=384,
                         hierarchical_per_document=3, diverse_per_document=4, documents_per_sample=1, target_tokens=1024,
                         samples=4, composition={"n1": 2, "n2": 2, "n3": 1}, out_dir=str(tmp_path / "hqa"),
                         cache_dir=str(tmp_path / "cache"))
    synthesize("hqa", data, generator=stubs.stub_generator(data, tokenizer))
    cfg = HQASFTConfig(**common(tmp_path, tokenizer_dir, max_position_embeddings=512), per_device_batch_size=4,
                       stages=[{"name": "s1", "data": str(tmp_path / "hqa"), "seq_len": 1024, "max_steps": STEPS,
                                "rope": {"theta": 20000.0}}])  # 4 conversations, batch 4: the same batch every step
    seen = Seen()
    result = HQASFTTrainer(cfg).train(callbacks=[seen])
    train = check_training(tmp_path, result.run_id, seen)
    assert train[-1] < train[0] - 0.5
    manifest = json.loads((result.checkpoint / "ctxbench_manifest.json").read_text())
    assert manifest["answer_tokens"]["trained"] == STEPS * manifest["answer_tokens"]["data"]


@pytest.fixture(scope="module")
def logo_data(tmp_path_factory, tokenizer_dir, data_dir) -> Path:
    """12 HotpotQA questions -> LOGO data (6 chunks of 64 tokens, M = 2, K = 4096) from the trainer tests' fake generator."""
    from ctxbench.harness.core import registry
    from ctxbench.trainers.data.synthesis import synthesize
    from ctxbench.trainers.logo.data import LogoDataConfig

    if "logo-fake" not in registry._REGISTRY["backend"]:  # pytest may have loaded tests/trainers/conftest.py already
        load_test_module("logo_trainer_fixtures", TESTS / "trainers" / "conftest.py")
    out = tmp_path_factory.mktemp("logo") / "data"
    cfg = {"data_file": str(data_dir / "hotpotqa" / "hotpot_dev_distractor_sample100.json"), "max_samples": 12,
           "chunk_tokens": 64, "num_chunks": 6, "threshold": 2, "num_rejected": 2, "target_window": 4096,
           "generator": {"model": tokenizer_dir, "backend": "logo-fake", "max_new_tokens": 12}, "seed": 0,
           "out_dir": str(out), "shard_size": 10}
    m = synthesize("logo", LogoDataConfig(**cfg))
    assert m["complete"] and m["samples"] >= 6
    return out


def test_logo_lora_steps_in_bf16_with_checkpointing(tmp_path, tokenizer_dir, logo_data):
    from ctxbench.trainers.logo.trainer import METRICS, LogoConfig, LogoTrainer

    cfg = LogoConfig(**common(tmp_path, tokenizer_dir, max_position_embeddings=4096), max_steps=STEPS, per_device_batch_size=2,
                     data={"path": str(logo_data), "eval_samples": 2, "max_samples": 2}, lora={"r": 4, "alpha": 8})
    seen = Seen()
    result = LogoTrainer(cfg).train(callbacks=[seen])
    train = check_training(tmp_path, result.run_id, seen)
    assert train[-1] < train[0]
    rows = [json.loads(x) for x in (result.run_dir / METRICS).read_text().splitlines() if '"train"' in x]
    margins = [r["rewards/margin"] for r in rows]
    assert len(margins) == STEPS and all(math.isfinite(x) for x in margins)
    print(f"logo reward margins {[round(x, 4) for x in margins]}")
    manifest = json.loads((result.checkpoint / "ctxbench_manifest.json").read_text())
    assert manifest["lora"]["r"] == 4 and manifest["lora"]["trainable_parameters"] < manifest["parameters"]


@pytest.mark.parametrize("precision", ["fp32", "bf16-autocast"])
def test_logo_mask_reaches_early_chunks_under_checkpointing_on_cuda(logo_data, tokenizer, precision):
    """Rewriting chunk 1 changes r(y_w) when the mask is passed; without it transformers reads the jumping position ids
    as packed sequences (use_cache off under checkpointing) and the answer would not see chunk 1 at all."""
    import contextlib

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from ctxbench.trainers.logo.loss import response_logps
    from ctxbench.trainers.logo.trainer import LogoResponses, collate_responses, response_rewards

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("llama", vocab_size=len(tokenizer), max_position_embeddings=4096,
                                                                  **TINY)).to("cuda")
    model.activation_checkpointing_enable()
    model.train()
    assert model.is_activation_checkpointing
    meta = json.loads((logo_data / "shard-00000.jsonl").read_text().splitlines()[0])
    start, size = meta["layout"]["head"] + meta["layout"]["chunks"][0], meta["layout"]["chunks"][1]  # chunk 1
    batch = {k: v.to("cuda") for k, v in collate_responses([LogoResponses(logo_data)[0]], pad_id=0).items()}
    edited = {k: v.clone() for k, v in batch.items()}
    edited["input_ids"][:, start: start + size] = (edited["input_ids"][:, start: start + size] + 101) % len(tokenizer)
    cast = torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16-autocast" else contextlib.nullcontext()

    def r_w(b, mask=True) -> float:
        with cast:
            if mask:
                return response_rewards(model, b, group=3)[0][0].item()
            out = model(input_ids=b["input_ids"], position_ids=b["position_ids"], use_cache=False)  # the same call, no mask
            return response_logps(out.logits, b["labels"])[0][0].item()

    with_mask, without = abs(r_w(batch) - r_w(edited)), abs(r_w(batch, False) - r_w(edited, False))
    print(f"{precision}: |Δr(y_w)| with mask {with_mask:.2e}, without {without:.2e}")
    assert with_mask > 1e-4
    assert without < 1e-6  # the hazard the mask avoids
