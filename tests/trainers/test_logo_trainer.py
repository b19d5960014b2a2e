"""The `logo` trainer on a tiny random Llama: rewards logged, LoRA trains only what it should, the merged model equals
the adapter model and scores, an interrupted run resumes to the same weights, the mask survives gradient checkpointing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import MANIFEST_NAME, TrainRun, load_config
from ctxbench.trainers.logo.data import LogoDataConfig
from ctxbench.trainers.logo.data import load_config as load_data_config
from ctxbench.trainers.logo.trainer import METRICS, LogoConfig, LogoResponses, LogoTrainer, collate_responses

REPO = Path(__file__).resolve().parents[2]
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "tie_word_embeddings": True, "max_position_embeddings": 4096}


def raw(tmp_path: Path, path: Path, **kw) -> dict:
    return {"base_model": {"config": TINY}, "store": str(tmp_path / "runs"), "max_steps": 4, "per_device_batch_size": 2,
            "learning_rate": 2e-3, "warmup_steps": 0, "save_steps": 2, "eval_steps": 2, "threads": 1, "seed": 0,
            "data": {"path": str(path), "eval_samples": 4}, "lora": {"r": 4, "alpha": 8}, **kw}


class Grab:
    """A callback that keeps the trained (PEFT) model at the end of training."""

    def __new__(cls):
        from transformers import TrainerCallback

        class _Grab(TrainerCallback):
            model = None

            def on_train_end(self, args, state, control, model=None, **kwargs):
                _Grab.model = model

        return _Grab()


def base_name(name: str) -> str:
    """A PEFT parameter name -> the plain model's (adapter wrappers removed)."""
    return name.removeprefix("base_model.model.").replace(".base_layer", "").replace(".original_module", "")


def eight_samples(tmp_path: Path, logo_data: Path) -> dict:
    """The 4-step run on 8 training samples (one epoch at batch 2) that the module's trainings share."""
    return raw(tmp_path, logo_data, data={"path": str(logo_data), "eval_samples": 4, "max_samples": 8})


@pytest.fixture(scope="module")
def trained(tmp_path_factory, logo_data):
    """eight_samples trained once for the module: (its config, the result, the trained PEFT model, the store's parent).
    Tests only read it (the interrupted run compares its own store's weights with these)."""
    root = tmp_path_factory.mktemp("logo-trained")
    cfg = LogoConfig(**eight_samples(root, logo_data))
    grab = Grab()
    result = LogoTrainer(cfg).train(callbacks=[grab])
    return cfg, result, type(grab).model, root


def test_training_logs_rewards_trains_only_lora_embeddings_and_norms_and_merges_exactly(tmp_path, trained, logo_data,
                                                                                      data_dir):
    cfg, result, peft_model, root = trained

    losses = TrainRun(root / "runs", result.run_id).losses()
    assert [r["step"] for r in losses if r["split"] == "train"] == [1, 2, 3, 4]
    assert [r["step"] for r in losses if r["split"] == "eval"] == [2, 4]
    rows = [json.loads(line) for line in (result.run_dir / METRICS).read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4] and {r["step"] for r in rows if r["split"] == "eval"} == {2, 4}
    for r, loss in zip(train, [x["loss"] for x in losses if x["split"] == "train"]):
        assert r["rewards/margin"] == pytest.approx(r["rewards/chosen"] - r["rewards/rejected"], abs=1e-4)
        assert 0 <= r["rewards/accuracy"] <= 1 and loss >= 0.1 * r["sft_loss"] - 1e-4  # -log σ(.) >= 0

    # 8 samples, batch 2, 4 steps: one epoch; tokens count real (unpadded) tokens only
    train_set = LogoResponses(logo_data, 0, 8)
    manifest = json.loads((result.checkpoint / MANIFEST_NAME).read_text())
    assert manifest["tokens"]["trained"] == manifest["tokens"]["data"] == train_set.tokens()
    assert manifest["lora"]["r"] == 4 and manifest["lora"]["ensure_weight_tying"] is True
    assert {"embed_tokens", "input_layernorm", "post_attention_layernorm", "norm"} <= set(manifest["lora"]["modules_to_save"])

    # only LoRA matrices, embeddings and norms changed; everything else is the untouched initialisation
    fresh = LogoTrainer(cfg)
    fresh.manifest = json.loads((logo_data / "manifest.json").read_text())
    from ctxbench.trainers.loop import HFTrainer

    init = dict(HFTrainer.build_model(fresh, LogoTrainer(cfg).prepare_data()).named_parameters())
    changed = set()
    for name, p in peft_model.named_parameters():
        if p.requires_grad:
            assert "lora_" in name or "modules_to_save" in name, name
            continue
        assert torch.equal(p.detach(), init[base_name(name)].detach()), f"frozen {name} changed"
    for name, p in peft_model.named_parameters():
        if "modules_to_save" in name:
            plain = base_name(name).replace(".modules_to_save.default", "")
            changed.add(plain) if not torch.equal(p.detach(), init[plain].detach()) else None
    assert any("embed_tokens" in n for n in changed) and any("norm" in n for n in changed)

    # the merged plain checkpoint gives the adapter model's logits
    from transformers import AutoModelForCausalLM

    assert not (result.checkpoint / "adapter_config.json").exists() and (result.checkpoint / "adapter" / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(result.checkpoint, dtype=torch.float32).eval()
    batch = collate_responses([train_set[0], train_set[1]], pad_id=0)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids")}
    peft_model.eval()
    with torch.no_grad():
        diff = (merged(**inputs).logits - peft_model(**inputs).logits).abs().max().item()
    assert diff < 1e-5, diff

    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.runner import RunPlan, run

    suite = Suite(name="tiny", lengths=[256], samples=1, tasks=[{"task": "niah/single", "args": {"depths": [50],
                                                                                             "tokens_to_generate": 8}}])
    outcome = run(RunPlan(suite, str(result.checkpoint), "hf", {"dtype": "float32", "threads": 1}, tmp_path / "scores", data_dir))
    rows = list(outcome.store.latest().values())
    assert len(rows) == 1 and rows[0]["score"] is not None and rows[0]["error"] is None
    assert LogoTrainer(cfg).train().skipped  # finished: not retrained


def test_sft_objective_is_lambda_times_the_chosen_nll(tmp_path, logo_data):
    result = LogoTrainer(LogoConfig(**raw(tmp_path, logo_data, objective="sft", max_steps=2))).train()
    losses = [r["loss"] for r in TrainRun(tmp_path / "runs", result.run_id).losses() if r["split"] == "train"]
    metrics = [json.loads(line) for line in (result.run_dir / METRICS).read_text().splitlines()]
    sft = [r["sft_loss"] for r in metrics if r["split"] == "train"]
    assert losses == pytest.approx([0.1 * s for s in sft], rel=1e-4)


def test_an_interrupted_run_resumes_to_the_uninterrupted_weights(tmp_path, logo_data, trained):
    """LoRA matrices, embeddings and norms come back from the adapter checkpoint: the final weights match bit for bit."""
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise RuntimeError("simulated crash")

    whole = trained[1]  # the same 4 steps, uninterrupted
    cut = LogoConfig(**eight_samples(tmp_path / "b", logo_data))
    with pytest.raises(RuntimeError, match="simulated crash"):
        LogoTrainer(cut).train(callbacks=[Interrupt()])
    resumed = LogoTrainer(cut).train()
    assert resumed.resumed_from_step == 2 and resumed.steps == 4 and whole.run_id == resumed.run_id
    a, b = load_file(whole.checkpoint / "model.safetensors"), load_file(resumed.checkpoint / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k


def test_the_answer_still_sees_early_chunks_under_gradient_checkpointing(logo_data):
    """Editing a token of chunk 1 changes r(y_w) with the mask passed; without it (use_cache off) transformers would
    read the jumping position ids as packed sequences and the answer would not see chunk 1 at all."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from ctxbench.trainers.logo.trainer import response_rewards

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("llama", vocab_size=49152, **TINY))
    model.activation_checkpointing_enable()
    model.train()
    data = LogoResponses(logo_data)
    meta = json.loads((logo_data / "shard-00000.jsonl").read_text().splitlines()[0])
    start = meta["layout"]["head"] + meta["layout"]["chunks"][0]  # first token of chunk 1
    batch = collate_responses([data[0]], pad_id=0)
    edited = {k: v.clone() for k, v in batch.items()}
    edited["input_ids"][:, start + 3] = (edited["input_ids"][:, start + 3] + 1) % 49152

    def r_w(b, mask=True):
        b = dict(b) if mask else {**b, "attention_mask": None}
        if not mask:  # the same call as response_rewards, without the mask
            out = model(input_ids=b["input_ids"], position_ids=b["position_ids"], use_cache=False)
            from ctxbench.trainers.logo.loss import response_logps

            return response_logps(out.logits, b["labels"])[0][0].item()
        return response_rewards(model, b, group=3)[0].item()

    assert abs(r_w(batch) - r_w(edited)) > 1e-5
    assert abs(r_w(batch, mask=False) - r_w(edited, mask=False)) < 1e-6  # the hazard the mask avoids


def test_a_model_window_below_the_target_window_is_refused(tmp_path, logo_data):
    small = {**TINY, "max_position_embeddings": 2048}
    with pytest.raises(ConfigError, match="rope.max_position_embeddings: 4096"):
        LogoTrainer(LogoConfig(**raw(tmp_path, logo_data, base_model={"config": small}))).train()
    ok = LogoConfig(**raw(tmp_path, logo_data, base_model={"config": small}, rope={"max_position_embeddings": 4096}))
    assert LogoTrainer(ok).model_window(LogoTrainer(ok).prepare_data()) == 4096


def test_data_from_another_tokenizer_is_refused(tmp_path, logo_data):
    other = tmp_path / "other"
    shutil.copytree(logo_data, other)
    m = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**m, "tokenizer": "some-other-model", "tokenizer_fingerprint": "0" * 16}))
    with pytest.raises(ConfigError, match="built with tokenizer 'some-other-model'"):
        LogoTrainer(LogoConfig(**raw(tmp_path, other))).train()


def test_missing_lora_targets_list_the_linear_modules(tmp_path, logo_data):
    with pytest.raises(ConfigError) as e:
        LogoTrainer(LogoConfig(**raw(tmp_path, logo_data, lora={"target_modules": ["query", "q_proj"]}))).train()
    msg = str(e.value)
    assert msg.startswith("lora.target_modules: query not in the model") and "down_proj" in msg and "q_proj" in msg


def test_bad_trainer_config_is_one_line(tmp_path, logo_data, repo_root, ctxbench, monkeypatch):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(raw(tmp_path, logo_data, sft_weight=-0.1)))
    with pytest.raises(ConfigError, match="sft_weight: Input should be greater than or equal to 0"):
        load_config(LogoConfig, f)
    monkeypatch.chdir(repo_root)  # the CLI in process: a refusal needs no process of its own
    code, _, err = ctxbench("train", "logo", "--config", str(f))
    assert code == 2 and "sft_weight" in err and "Traceback" not in err
    f.write_text(yaml.safe_dump({**raw(tmp_path, logo_data), "data": {"path": "x", "synthesis": {}}}))
    with pytest.raises(ConfigError, match="exactly one of"):
        load_config(LogoConfig, f)


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "trainers").glob("logo-*.yaml")), ids=lambda p: p.name)
def test_shipped_trainer_configs_validate(path):
    cfg = load_config(LogoConfig, path)
    assert cfg.max_steps and cfg.data.path and cfg.lora is not None
    data = REPO / "configs" / "data" / f"{Path(cfg.data.path).name}.yaml"
    d: LogoDataConfig = load_data_config(data)
    assert d.out_dir == cfg.data.path and d.generator.model == cfg.base_model  # the policy writes its own data
    window = (cfg.rope.max_position_embeddings if cfg.rope else None) or d.target_window
    assert window >= d.target_window and np.isfinite(cfg.beta)


def test_every_logo_config_field_has_help():
    from ctxbench.trainers.logo.data import GeneratorConfig
    from ctxbench.trainers.logo.lora import LoraSpec
    from ctxbench.trainers.logo.trainer import LogoTrainData

    for cls in (LogoConfig, LogoTrainData, LoraSpec, LogoDataConfig, GeneratorConfig):
        missing = [name for name, f in cls.model_fields.items() if not f.description]
        assert not missing, f"{cls.__name__}: {missing}"
