"""hqa_sft: the answer-only loss, stepwise RoPE stages as ordinary runs, resume, refusals, shipped configs."""

from __future__ import annotations

import json
import math
import pathlib
from pathlib import Path

import pytest
import yaml

from ctxbench.harness.core.errors import ConfigError
from ctxbench.trainers.base import MANIFEST_NAME, TrainRun, load_config
from ctxbench.trainers.data.synthesis import synthesize
from ctxbench.trainers.hqa.data import HQADataConfig, load_data_config
from ctxbench.trainers.hqa.loss import answer_loss_sum
from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

REPO = pathlib.Path(__file__).resolve().parents[2]
TINY_MODEL = {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                         "num_key_value_heads": 2, "tie_word_embeddings": True, "max_position_embeddings": 512}}


def stub_backend(tok):
    """The data tests' deterministic stub generator (tests run with --import-mode=importlib: load it by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hqa_data_tests", pathlib.Path(__file__).with_name("test_hqa_data.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.StubBackend(tok)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, smol_tokenizer, data_dir):
    """Stage data from the stub generator: 1 document per conversation (<= 1024 tokens), then 2 (<= 2048)."""
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.trainers.hqa.generate import Generator

    root = tmp_path_factory.mktemp("hqa")
    out = {}
    for name, k, target in (("s1", 1, 1024), ("s2", 2, 2048)):
        cfg = HQADataConfig(documents={"path": str(data_dir / "squad/dev-v2.0.json"), "max_documents": 4},
                            tokenizer="smollm2-135m", generator={"model": "smollm2-135m", "max_new_tokens": 32},
                            small_tokens=128, medium_tokens=384, hierarchical_per_document=3, diverse_per_document=4,
                            documents_per_sample=k, target_tokens=target, samples=4, composition={"n1": 2, "n2": 2, "n3": 1},
                            out_dir=str(root / name), cache_dir=str(root / "cache"))
        gen = Generator(cfg.generator, root / "cache", max_retries=cfg.max_retries)
        gen._backend, gen._renderer = stub_backend(smol_tokenizer), PromptRenderer(smol_tokenizer, "chat")
        synthesize("hqa", cfg, generator=gen)
        out[name] = root / name
    return out


def stages_config(tmp_path, datasets, **kw) -> dict:
    return {"base_model": TINY_MODEL, "store": str(tmp_path / "runs"), "per_device_batch_size": 1, "learning_rate": 5e-3,
            "save_steps": 2, "threads": 1, "seed": 0, "lr_scheduler": "constant",
            "stages": [{"name": "s1", "data": str(datasets["s1"]), "seq_len": 1024, "max_steps": 3, "rope": {"theta": 20000.0}},
                       {"name": "s2", "data": str(datasets["s2"]), "seq_len": 2048, "max_steps": 3, "rope": {"theta": 40000.0}}],
            **kw}


# --- 2. the loss ---------------------------------------------------------------------------------------------
def test_answer_loss_is_the_mean_ce_over_answer_tokens_computed_only_there():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    ids = torch.randint(0, 97, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[0, 3:6] = ids[0, 3:6]
    labels[1, 8:12] = ids[1, 8:12]
    mask = torch.ones_like(ids)
    mask[0, 10:] = 0  # right padding of row 0
    with torch.no_grad():
        total, n = answer_loss_sum(model, ids, mask, labels)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.double(), dim=-1)
        own = float(model(input_ids=ids, attention_mask=mask, labels=labels).loss)
    ref = [-logp[b, t - 1, ids[b, t]] for b in range(2) for t in range(12) if labels[b, t] != -100]
    assert int(n) == len(ref) == 7
    assert abs(float(total / n) - float(sum(ref) / len(ref))) < 1e-5
    # the same number the model's own (full-logits) loss gives: only where the LM head runs differs
    assert abs(float(total / n) - own) < 1e-5


def test_gradient_accumulation_averages_over_the_global_batch_answer_tokens(tmp_path, datasets):
    """Two micro-batches of unequal answer counts: the step's loss is their pooled mean, not the mean of means."""
    from transformers import TrainingArguments

    from ctxbench.trainers.hqa.trainer import StageTrainer

    trainer = HQASFTTrainer(HQASFTConfig(**stages_config(tmp_path, datasets))).stage_trainers()[0]
    data = trainer.prepare_data()
    model = trainer.build_model(data)
    rows = [data.train[0], data.train[1]]
    collate = trainer.data_collator()
    import torch

    with torch.no_grad():
        sums = [answer_loss_sum(model, **{k: v for k, v in collate([r]).items()}) for r in rows]
    pooled = float(sum(s for s, _ in sums) / sum(n for _, n in sums))
    args = TrainingArguments(**{**trainer.training_arguments(data), "gradient_accumulation_steps": 2, "learning_rate": 1e-12,
                                "max_steps": 1, "logging_steps": 1, "output_dir": str(tmp_path / "ga")})
    hf = trainer.hf_trainer_class()(model=model, args=args, train_dataset=rows, data_collator=collate)
    hf.train()
    logged = [h["loss"] for h in hf.state.log_history if "loss" in h]
    assert abs(logged[0] - pooled) < 1e-3 and isinstance(trainer, StageTrainer)


# --- 7. stages -----------------------------------------------------------------------------------------------
def test_two_stages_chain_checkpoints_rope_and_rerun_nothing(tmp_path, datasets, data_dir):
    cfg = HQASFTConfig(**stages_config(tmp_path, datasets))
    trainer = HQASFTTrainer(cfg)
    last = trainer.train()
    s1, s2 = trainer.results
    m1 = json.loads((s1.checkpoint / MANIFEST_NAME).read_text())
    m2 = json.loads((s2.checkpoint / MANIFEST_NAME).read_text())
    assert m2["base_model"] == str(s1.checkpoint) and m1["stage"] == "s1" and m2["stage"] == "s2"
    assert s1.run_id != s2.run_id and last == s2
    for ckpt, theta, window in ((s1.checkpoint, 20000.0, 1024), (s2.checkpoint, 40000.0, 2048)):
        c = json.loads((ckpt / "config.json").read_text())
        assert c["rope_parameters"]["rope_theta"] == theta and c["max_position_embeddings"] == window
    # token accounting: non-padding tokens, and the answer tokens the loss saw
    assert m1["tokens"]["trained"] > 0 and 0 < m1["answer_tokens"]["trained"] < m1["tokens"]["trained"]
    assert m1["data_info"]["answer_tokens"] > 0 and m1["data_info"]["generator_drops"] == {}
    for result in trainer.results:  # each stage is an ordinary run with its own loss log
        assert [r["step"] for r in TrainRun(tmp_path / "runs", result.run_id).losses() if r["split"] == "train"] == [1, 2, 3]
    again = HQASFTTrainer(cfg)
    again.train()
    assert all(r.skipped for r in again.results)

    from ctxbench.harness.core.config import Suite
    from ctxbench.harness.run.runner import RunPlan, run

    suite = Suite(name="tiny", lengths=[256], samples=1, tasks=[{"task": "niah/single", "args": {"depths": [50],
                                                                                             "tokens_to_generate": 8}}])
    store = run(RunPlan(suite, str(s2.checkpoint), "hf", {"dtype": "float32", "threads": 1}, tmp_path / "scores", data_dir)).store
    rows = list(store.latest().values())
    assert len(rows) == 1 and rows[0]["error"] is None


def test_an_interrupted_stage_resumes_from_its_checkpoint_and_loss_falls(tmp_path, datasets):
    from transformers import TrainerCallback

    raw = stages_config(tmp_path, datasets, output_dir=str(tmp_path / "ckpt"))
    raw["stages"][0]["max_steps"] = 2  # stage 1 is only the finished stage the rerun must skip
    raw["stages"][1]["max_steps"] = 5  # crash after checkpoint-2 at step 3; the rerun trains steps 3-5 from it
    raw["stages"][1]["epochs"] = None
    cfg = HQASFTConfig(**raw)

    class CrashInStage2(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3 and args.output_dir.endswith("s2"):
                raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated crash"):
        HQASFTTrainer(cfg).train(callbacks=[CrashInStage2()])
    assert (tmp_path / "ckpt" / "s1" / MANIFEST_NAME).exists() and (tmp_path / "ckpt" / "s2" / "checkpoint-2").is_dir()
    trainer = HQASFTTrainer(cfg)
    trainer.train()
    assert trainer.results[0].skipped and trainer.results[1].resumed_from_step == 2
    losses = [r["loss"] for r in TrainRun(tmp_path / "runs", trainer.results[1].run_id).losses() if r["split"] == "train"]
    assert len(losses) == 5 and losses[-1] < losses[0]  # answer loss falls


# --- bad input -----------------------------------------------------------------------------------------------
def test_bad_stage_configs_are_one_line(tmp_path, datasets):
    base = stages_config(tmp_path, datasets)
    flipped = {**base, "stages": [{**base["stages"][1]}, {**base["stages"][0], "name": "s3"}]}
    for raw, hint in [(flipped, "seq_len must increase"), ({**base, "rope": {"theta": 1e6}}, "per stage"),
                      ({**base, "stagez": []}, "stagez: unknown key"),
                      ({**base, "stages": [{**base["stages"][0], "epochs": 1}]}, "epochs or max_steps")]:
        f = tmp_path / "c.yaml"
        f.write_text(yaml.safe_dump(raw))
        with pytest.raises(ConfigError) as e:
            load_config(HQASFTConfig, f)
        assert hint in str(e.value) and "\n" not in str(e.value)


def test_refusals_before_training(tmp_path, datasets, smol_tokenizer):
    short = stages_config(tmp_path, datasets)
    short["stages"][0]["seq_len"] = 300  # the data's conversations are longer
    with pytest.raises(ConfigError, match=r"stages.s1.seq_len: conversation .* has \d+ tokens > 300"):
        HQASFTTrainer(HQASFTConfig(**short)).train()
    with pytest.raises(ConfigError, match=r"^stages\.\w+\.sequence_parallel: 8 needs DeepSpeed"):  # no deepspeed in the config
        sp = stages_config(tmp_path, datasets)
        sp["stages"][1]["sequence_parallel"] = 8
        HQASFTTrainer(HQASFTConfig(**sp)).train()
    assert not (tmp_path / "runs").exists()  # refused before any work
    with pytest.raises(ConfigError, match="--stage: no stage named 'x'"):
        HQASFTTrainer(HQASFTConfig(**stages_config(tmp_path, datasets)), stage="x")
    templ = stages_config(tmp_path, datasets, base_model={**TINY_MODEL, "tokenizer": str(tmp_path / "plain-tok")})
    plain = __import__("copy").deepcopy(smol_tokenizer)
    plain.chat_template = None
    plain.save_pretrained(tmp_path / "plain-tok")
    (tmp_path / "plain-tok" / "chat_template.jinja").unlink(missing_ok=True)
    (tmp_path / "plain-tok" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ConfigError, match="has no chat template"):
        HQASFTTrainer(HQASFTConfig(**templ)).train()


def test_data_from_another_tokenizer_is_refused(tmp_path, datasets):
    other = tmp_path / "other"
    other.mkdir()
    m = json.loads((datasets["s1"] / "manifest.json").read_text())
    for f in datasets["s1"].iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    (other / "manifest.json").write_text(json.dumps({**m, "tokenizer": "gpt2", "tokenizer_fingerprint": "0123456789abcdef"}))
    raw = stages_config(tmp_path, datasets)
    raw["stages"] = [{**raw["stages"][0], "data": str(other)}]
    with pytest.raises(ConfigError, match="synthesized with tokenizer 'gpt2'"):
        HQASFTTrainer(HQASFTConfig(**raw)).train()


def test_stage_option_is_refused_by_trainers_without_stages(tmp_path, repo_root, ctxbench, monkeypatch):
    f = tmp_path / "cpt.yaml"
    f.write_text("base_model: smollm2-135m\ndata: {path: x}\n")
    monkeypatch.chdir(repo_root)  # the CLI in process: a refusal needs no process of its own
    code, _, err = ctxbench("train", "cpt", "--config", str(f), "--stage", "a")
    assert code == 2 and "--stage: trainer 'cpt' has no stages" in err and "Traceback" not in err


# --- shipped configs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted((REPO / "configs" / "trainers").glob("hqa-sft-*.yaml")), ids=lambda p: p.name)
def test_shipped_hqa_trainer_configs_validate(path, monkeypatch):
    monkeypatch.chdir(REPO)
    cfg = load_config(HQASFTConfig, path)
    lens = [s.seq_len for s in cfg.stages]
    assert lens == sorted(lens) and all(s.rope is not None for s in cfg.stages)
    HQASFTTrainer(cfg).stage_configs()  # every stage's data config resolves (nothing synthesized, no tokenizer)


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "data").glob("hqa-*.yaml")), ids=lambda p: p.name)
def test_shipped_hqa_data_configs_validate(path):
    cfg = load_data_config(path)
    assert cfg.target_tokens >= cfg.medium_tokens * cfg.documents_per_sample
    assert math.isclose(cfg.multihop_p, 0.2)


def test_ablation_study_methods_validate(monkeypatch, tmp_path):
    """The Table 7 study: every method is a valid two-stage hqa_sft config over valid data, with its own composition,
    synthesized from the study corpus into its own directory."""
    from ctxbench.harness.studies import load_study
    from ctxbench.harness.studies.config import study_inputs, trainer_config
    monkeypatch.chdir(tmp_path)  # config paths resolve against the repository from anywhere
    study = load_study(REPO / "configs" / "studies" / "hqa-ablation-cpu.yaml")
    seen = set()
    for m in study.methods:
        inputs = study_inputs(study, m, 0, study.corpus, None)
        stages = trainer_config(study, m, 0, inputs).stages  # stage_trainers() would synthesize (run ids hash the data)
        datas = [load_data_config(Path(s.data), **s.data_args) for s in stages]
        comps = {d.composition for d in datas}
        assert len(comps) == 1 and [s.seq_len for s in stages] == [1024, study.seq_len]
        assert all(d.documents.corpus["path"] == study.corpus["path"] and Path(d.out_dir).parent == inputs.out_dir for d in datas)
        comp = comps.pop()
        seen.add((comp.after, comp.revisit, comp.counts, comp.summary))
    assert len(seen) == len(study.methods) and study.reference == "hs-hs-hs-fixed"
