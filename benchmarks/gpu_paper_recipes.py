"""The paper recipes' first steps on one GPU: loss falling, tokens/s per GPU, peak memory against the memory plan.

Each recipe (the CPT Quest and SPLICE configs, hierarchical-QA SFT's first stage, LOGO on Llama-3-8B) runs through its
real trainer (ctxbench.trainers: the loop, the trainer's own loss and collator) with the config's optimiser, schedule,
batch, accumulation and activation checkpointing, changed only where one GPU and no network demand it:
- the model is SmolLM2-135M-SHAPED (hidden 576, 30 layers, 9 heads, 3 KV heads, MLP 1536, vocabulary 49152) with
  random weights, built from its config (no weights are downloaded); the tokenizer comes from $CTXBENCH_GPU_TOKENIZER;
- bf16 and SDPA attention, no DeepSpeed (one process); the sequence length is one that fits one H100 (RECIPES);
- the schedule is the recipe's squeezed into the steps run (its warmup fraction kept), so 20 steps see its peak rate;
- the data is synthesized on the fly: the Python standard library's source tokenized (CPT: packed sequences; hqa_sft:
  conversations whose last 5% are the answer; LOGO: a chosen and M rejected replies over the same chunked context).
Per recipe it prints and writes to --out (JSON): the loss at the first and last step, tokens/s per GPU over the steps
after the first, torch.cuda.max_memory_allocated and the plan's prediction (trainers/memory_plan.py) for the same run.
It exits 1, naming the recipe, when a loss is not finite or does not fall. `--tiny` runs the same path on a CPU with a
tiny model (the unit test). Usage:
  CTXBENCH_GPU_TOKENIZER=DIR python benchmarks/gpu_paper_recipes.py --out gpu_recipes.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SMOLLM2_135M = {"hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": True}
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "tie_word_embeddings": True}
ANSWER_SHARE = 0.05  # hqa_sft: the answers' share of a conversation (the memory plan's estimate too)


@dataclass(frozen=True)
class Recipe:
    name: str
    trainer: str  # cpt, hqa_sft, logo
    config: str  # configs/trainers/NAME.yaml
    seq_len: int  # on one H100 (CPT, hqa_sft); LOGO: chunks x chunk tokens + reply
    tiny_seq_len: int
    learning_rate: float | None = None  # None: the recipe's


# LOGO's 5e-7 fine-tunes a pretrained 8B model; on random weights 20 steps at that rate change nothing measurable (H100:
# 4.13 -> 4.30 with arbitrary preferences, batch-to-batch noise), so its loss check runs at 1e-4 (both rates are in the JSON).
LOGO_CHECK_RATE = 1e-4


RECIPES = (
    Recipe("cpt-quest-1.4b-32k", "cpt", "cpt-quest-1.4b-32k", 16384, 128),
    Recipe("cpt-splice-3b-32k", "cpt", "cpt-splice-3b-32k", 16384, 128),
    Recipe("hqa-sft-llama3.1-8b-1m (stage 180k)", "hqa_sft", "hqa-sft-llama3.1-8b-1m", 65536, 256),
    Recipe("logo-llama3-8b-instruct-64k", "logo", "logo-llama3-8b-instruct-64k", 16 * 512 + 512, 256, LOGO_CHECK_RATE),
)


# --- data ----------------------------------------------------------------------------------------------------------
_TOKENS: dict[str, np.ndarray] = {}  # tokenizer -> the longest run of stdlib tokens made so far


def stdlib_tokens(tokenizer: Any, needed: int) -> np.ndarray:
    """`needed` token ids of the Python standard library's source, in a fixed file order (repeated if it is short)."""
    import sysconfig

    have = _TOKENS.get(tokenizer.name_or_path)
    if have is None or len(have) < needed:
        out: list[int] = []
        for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
            out.extend(tokenizer(path.read_text(errors="replace"), add_special_tokens=False)["input_ids"])
            if len(out) >= needed:
                break
        have = _TOKENS[tokenizer.name_or_path] = np.asarray(out, dtype=np.int64)
    return np.resize(have, needed)


def cpt_rows(tokens: np.ndarray, seq: int, n: int) -> list[dict[str, np.ndarray]]:
    return [{"input_ids": tokens[i * seq:(i + 1) * seq]} for i in range(n)]


def hqa_rows(tokens: np.ndarray, seq: int, n: int) -> list[dict[str, np.ndarray]]:
    rows = []
    for row in cpt_rows(tokens, seq, n):
        labels = np.full(seq, -100, dtype=np.int32)
        labels[-int(seq * ANSWER_SHARE):] = row["input_ids"][-int(seq * ANSWER_SHARE):]
        rows.append({"input_ids": row["input_ids"].astype(np.int32), "labels": labels})
    return rows


def logo_rows(tokens: np.ndarray, seq: int, n: int, group: int, window: int) -> list[dict[str, list[np.ndarray]]]:
    """Each sample: `group` replies after the same context, positions spread over the target window as LOGO's chunks
    are; only the reply (its last 512 tokens, or a quarter of a tiny one) is labelled. The chosen reply is real text,
    the rejected ones uniformly drawn tokens: a preference a random model learns in a few steps (as it learns the
    text's token statistics), so the preference term can fall as well as the SFT term."""
    reply = min(512, seq // 4)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        context = tokens[i * seq:(i + 1) * seq - reply]
        positions = np.sort(rng.choice(np.arange(window - reply), size=seq - reply, replace=False))
        ids, labels, pos = [], [], []
        for g in range(group):
            first = n * seq + i * reply
            answer = tokens[first:first + reply] if g == 0 else rng.integers(0, int(tokens.max()) + 1, size=reply)
            ids.append(np.concatenate([context, answer]))
            labels.append(np.concatenate([np.full(len(context), -100), answer]))
            pos.append(np.concatenate([positions, np.arange(window - reply, window)]))
        rows.append({"input_ids": ids, "labels": labels, "position_ids": pos})
    return rows


# --- the recipes as configs ----------------------------------------------------------------------------------------
def recipe_config(r: Recipe, *, steps: int, tokenizer: str, store: Path, tiny: bool) -> dict[str, Any]:
    """The recipe's YAML with the model, precision, attention, data and schedule length made to run on one GPU."""
    import yaml

    raw = yaml.safe_load((REPO / "configs" / "trainers" / f"{r.config}.yaml").read_text())
    recipe_rate = float(raw.get("learning_rate", 2e-5))
    seq = r.tiny_seq_len if tiny else r.seq_len
    stage = raw.pop("stages", [{}])[0]
    rope = stage.get("rope") or raw.get("rope") or {}
    window = max(seq, int(rope.get("max_position_embeddings", seq)))
    model = {**(TINY if tiny else SMOLLM2_135M), "max_position_embeddings": window}
    if rope.get("type") == "llama3":  # the scaled model's own (Llama-3.1) rope parameters, which `rope` then changes
        model["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    warmup = float(stage.get("warmup_steps", raw.get("warmup_steps", 0)))
    paper_steps = int(raw.get("max_steps") or 1000)
    raw.update(base_model={"config": model, "tokenizer": tokenizer}, store=str(store), deepspeed=None,
               attn_implementation="sdpa", precision="fp32" if tiny else "bf16", max_steps=steps, save_steps=10 * steps,
               warmup_steps=warmup if warmup < 1 else round(steps * warmup / paper_steps), logging_steps=1,
               dataloader_workers=0, delete_checkpoints=True, label=r.config, threads=0)
    raw["learning_rate"] = r.learning_rate or raw.get("learning_rate", 2e-5)
    if tiny:
        raw["gradient_accumulation_steps"] = min(2, int(raw.get("gradient_accumulation_steps", 1)))
        raw["learning_rate"] = 1e-3  # a tiny random model in a few steps: a rate that shows the fall
    raw["rope"] = {k: v for k, v in rope.items() if k != "max_position_embeddings"} | {"max_position_embeddings": window}
    raw.pop("eval_samples", None)
    return {"raw": raw, "seq": seq, "window": window, "recipe_learning_rate": recipe_rate}


def build_trainer(r: Recipe, made: dict[str, Any], tokens_of) -> Any:
    """The recipe's trainer with prepare_data() replaced by the synthesized rows (no data files, no generator)."""
    from ctxbench.trainers.base import DataBundle

    raw, seq, steps = made["raw"], made["seq"], made["raw"]["max_steps"]
    n = steps * int(raw.get("gradient_accumulation_steps", 1)) * int(raw.get("per_device_batch_size", 1))
    if r.trainer == "cpt":
        from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

        config, cls, rows = CPTConfig(**{**raw, "data": {"path": "synthetic"}}), CPTTrainer, cpt_rows(tokens_of(n * seq), seq, n)
    elif r.trainer == "hqa_sft":
        from ctxbench.trainers.hqa.trainer import HQAStageConfig, StageTrainer

        config = HQAStageConfig(**raw, stage="first", data="synthetic", data_identity="synthetic", seq_len=seq)
        cls, rows = StageTrainer, hqa_rows(tokens_of(n * seq), seq, n)
    else:
        from ctxbench.trainers.logo.trainer import LogoConfig, LogoTrainer

        config, cls = LogoConfig(**{**raw, "data": {"path": "synthetic", "eval_samples": 0}}), LogoTrainer
        group = 1 + 2
        rows = logo_rows(tokens_of(n * seq + n * min(512, seq // 4)), seq, n, group, made["window"])
    data = DataBundle(rows, None, f"synthetic-{r.config}-{seq}", seq, seq, {"tokens": n * seq, "synthetic": True})

    class Synthetic(cls):
        def prepare_data(self):
            if r.trainer == "logo":
                self.manifest = {"responses_per_sample": group, "target_window": made["window"], "max_real_length": seq,
                                 "generator": {}}
            return data

    return Synthetic(config)


# --- one recipe ----------------------------------------------------------------------------------------------------
def step_clock():
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        """Wall time and tokens at the end of every step (the first step's compile and warm-up are left out)."""

        marks: list[tuple[float, int]] = []

        def on_step_end(self, args, state, control, **kwargs):
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
            Clock.marks.append((time.perf_counter(), int(state.num_input_tokens_seen or 0)))

    Clock.marks = []
    return Clock()


def run_recipe(r: Recipe, *, steps: int, tokenizer: str, work: Path, tiny: bool) -> dict[str, Any]:
    import torch

    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.trainers.base import TrainRun
    from ctxbench.trainers.memory_plan import per_gpu

    tok = load_tokenizer(tokenizer)
    made = recipe_config(r, steps=steps, tokenizer=tokenizer, store=work / "runs", tiny=tiny)
    trainer = build_trainer(r, made, lambda n: stdlib_tokens(tok, n))
    [w] = plan_workload(r, trainer, made)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    clock = step_clock()
    result = trainer.train(callbacks=[clock])
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    losses = [row["loss"] for row in TrainRun(work / "runs", result.run_id).losses() if row["split"] == "train"]
    (t0, k0), (t1, k1) = type(clock).marks[0], type(clock).marks[-1]
    plan = per_gpu(w, 1)
    return {"recipe": r.name, "trainer": r.trainer, "config": f"configs/trainers/{r.config}.yaml", "seq_len": made["seq"],
            "steps": result.steps, "micro_batches_per_step": int(made["raw"].get("gradient_accumulation_steps", 1)),
            "learning_rate": made["raw"]["learning_rate"], "recipe_learning_rate": made["recipe_learning_rate"],
            "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None, "losses": losses,
            "tokens": result.tokens, "tokens_per_s_per_gpu": (k1 - k0) / (t1 - t0) if t1 > t0 else None,
            "peak_allocated_gib": peak / 2**30 if peak is not None else None,
            "plan_gib": {"weights": plan.weights / 2**30, "gradients": plan.gradients / 2**30,
                         "optimizer": plan.optimizer / 2**30, "activations": plan.activations / 2**30,
                         "total": plan.total / 2**30},
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}


def plan_workload(r: Recipe, trainer: Any, made: dict[str, Any]) -> list[Any]:
    """The memory plan of exactly this run (1 GPU, no DeepSpeed, the synthesized lengths)."""
    from ctxbench.trainers.memory_plan import lora_trainable, shape_of, workload

    c, seq = trainer.config, made["seq"]
    if r.trainer == "cpt":
        return [workload(c, r.name, seq_len=seq, sequences=c.per_device_batch_size)]
    if r.trainer == "hqa_sft":
        return [workload(c, r.name, seq_len=seq, sequences=c.per_device_batch_size, logit_positions=ANSWER_SHARE)]
    trained = lora_trainable(shape_of(c.base_model), c.lora) if c.lora else None
    return [workload(c, r.name, seq_len=seq, sequences=c.per_device_batch_size * 3, trainable=trained,
                     logit_positions=min(512, seq // 4) / seq)]


def tokenizer_spec(work: Path) -> str:
    """$CTXBENCH_GPU_TOKENIZER (a saved tokenizer) as a model directory ctxbench loads (with a config.json), else the
    embedded smollm2-135m alias."""
    source = os.environ.get("CTXBENCH_GPU_TOKENIZER")
    if not source:
        return "smollm2-135m"
    from transformers import AutoTokenizer, LlamaConfig

    tok = AutoTokenizer.from_pretrained(source)
    tok.save_pretrained(work)
    LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2).save_pretrained(work)
    return str(work)


def failure(row: dict[str, Any]) -> str | None:
    first, last = row["loss_first"], row["loss_last"]
    if first is None or not (math.isfinite(first) and math.isfinite(last)):
        return f"{row['recipe']}: loss not finite ({first} -> {last})"
    if not last < first:
        return f"{row['recipe']}: loss did not fall ({first:.4f} -> {last:.4f})"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file for the results")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps per recipe")
    ap.add_argument("--tiny", action="store_true", help="a tiny model and short sequences on the CPU (the unit test)")
    ap.add_argument("--recipes", default="", help="comma-separated substrings of recipe names; default all")
    args = ap.parse_args(argv)
    import torch

    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit("gpu_paper_recipes: no CUDA GPU; use --tiny for the CPU path")
    tokenizer = tokenizer_spec(Path(tempfile.mkdtemp(prefix="gpu-recipe-tokenizer-")))
    chosen = [r for r in RECIPES if not args.recipes or any(s in r.name for s in args.recipes.split(","))]
    rows, failures = [], []
    for r in chosen:
        with tempfile.TemporaryDirectory(prefix="gpu-recipe-") as work:
            row = run_recipe(r, steps=args.steps, tokenizer=tokenizer, work=Path(work), tiny=args.tiny)
        rows.append(row)
        speed = f"{row['tokens_per_s_per_gpu']:,.0f}" if row["tokens_per_s_per_gpu"] else "?"
        peak = f"{row['peak_allocated_gib']:.1f}" if row["peak_allocated_gib"] is not None else "-"
        print(f"{r.name}: seq {row['seq_len']:,}, loss {row['loss_first']:.4f} -> {row['loss_last']:.4f} in {row['steps']} "
              f"steps, {speed} tokens/s per GPU, peak {peak} GiB vs plan {row['plan_gib']['total']:.1f} GiB", flush=True)
        if (why := failure(row)) is not None:
            failures.append(why)
    Path(args.out).write_text(json.dumps({"recipes": rows, "failures": failures}, indent=2))
    for why in failures:
        print(f"FAILED {why}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
