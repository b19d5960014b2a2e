"""Benchmark hierarchical-QA synthesis and training: what the data costs, and what answer-only SFT costs.

    python benchmarks/hqa_generation.py --data hqa-data/tiny [--data-config configs/data/hqa-paper-180k.yaml]
        [--model smollm2-135m] [--seq-len 2048] [--steps 3] [--rounds 2] [--json OUT]

1. Generator cost per 1M tokens of training context, measured from a finished synthesis (its manifest counts
   every distinct generator call and its prompt/generated tokens): calls, prompt tokens and generated tokens per
   1M conversation tokens. With --data-config, also the same ratios projected for that config from its sizes
   (per document: its small chunks + medium sections + 1 summaries and its hierarchical + diverse QAs, first
   attempts only; a document contributes its token budget to one conversation on average).
2. hqa_sft vs cpt training throughput at equal seq_len on the same model: non-padding tokens per process-CPU second
   (and per wall second) of optimizer steps (batch 1, fp32, 1 thread), measured interleaved in one process: --rounds
   runs of each trainer in ABBA order (cpt, hqa, hqa, cpt, ...), each run's first step a warm-up, model building and
   data preparation excluded. Sequential runs compared two different machine loads on a shared CPU. cpt trains on
   standard-packed stdlib code of exactly seq_len tokens; hqa_sft on the conversations of --data (answer-only loss,
   LM head at answer positions only).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def generation_ratios(data: Path) -> dict:
    m = json.loads((data / "manifest.json").read_text())
    tokens = m["counts"]["tokens"]["total"]
    g = m["counts"]["generator"]
    per = 1e6 / tokens
    return {"source": str(data), "conversation_tokens": tokens, "calls": g["calls"],
            "calls_per_1M": g["calls"] * per, "prompt_tokens_per_1M": g["prompt_tokens"] * per,
            "generated_tokens_per_1M": g["generated_tokens"] * per,
            "generated_per_context_token": g["generated_tokens"] / tokens}


def projected_ratios(config: Path) -> dict:
    from ctxbench.trainers.hqa.data import load_data_config, turns_per_sample

    cfg = load_data_config(config)
    k = cfg.documents_per_sample
    doc = (cfg.target_tokens - turns_per_sample(cfg) * (cfg.generator.max_new_tokens + 10)) // k  # ~ document_budget
    doc = min(doc, cfg.max_document_tokens or doc)
    smalls = -(-doc // cfg.small_tokens)
    mediums = -(-doc // cfg.medium_tokens)
    calls = smalls + mediums + 1 + cfg.hierarchical_per_document + cfg.diverse_per_document
    per = 1e6 / doc
    return {"source": str(config), "document_tokens": doc, "calls_per_document": calls, "calls_per_1M": calls * per,
            "generated_tokens_per_1M_upper": calls * cfg.generator.max_new_tokens * per}


def step_clock():
    """A callback timing each optimizer step (wall and process CPU seconds, non-padding tokens), end to end of steps."""
    import time

    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.rows: list[tuple[float, float, int]] = []
            self._last = None

        def on_train_begin(self, args, state, control, **kwargs):
            self._last = (time.perf_counter(), time.process_time(), int(state.num_input_tokens_seen or 0))

        def on_step_end(self, args, state, control, **kwargs):
            now = (time.perf_counter(), time.process_time(), int(state.num_input_tokens_seen or 0))
            self.rows.append(tuple(b - a for a, b in zip(self._last, now)))
            self._last = now

    return StepClock()


def throughput(model: str, data: Path, seq_len: int, steps: int, rounds: int, work: Path) -> dict:
    """cpt and hqa_sft interleaved in one process (rounds in ABBA order), so both see the same machine load. The first
    step of every run is a warm-up and not counted; the ratio uses process CPU time (steady on a shared machine),
    wall time is reported beside it."""
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

    common = {"base_model": model, "per_device_batch_size": 1, "learning_rate": 1e-5, "save_steps": 1000,
              "threads": 1, "precision": "fp32", "seed": 0}
    corpus = resolve_corpus({"path": "stdlib:json,email"}, work)
    packed = work / "packed"
    synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=seq_len, budget_tokens=seq_len * (steps + 2),
                               tokenizer=model if not Path(model).is_dir() else "smollm2-135m", seed=0, out_dir=str(packed)))
    make = {
        "cpt": lambda: CPTTrainer(CPTConfig(**common, store=str(work / "runs-cpt"), max_steps=steps,
                                            data={"path": str(packed), "eval_sequences": 0})),
        "hqa_sft": lambda: HQASFTTrainer(HQASFTConfig(**common, store=str(work / "runs-hqa"), stages=[
            {"name": "bench", "data": str(data), "seq_len": seq_len, "max_steps": steps}])),
    }
    timed: dict[str, list[tuple[float, float, int]]] = {"cpt": [], "hqa_sft": []}
    per_round = []
    for r in range(rounds):
        order = ("cpt", "hqa_sft") if r % 2 == 0 else ("hqa_sft", "cpt")
        this = {}
        for name in order:
            clock = step_clock()
            make[name]().train(callbacks=[clock], fresh=True)
            rows = clock.rows[1:]  # the first step warms up
            timed[name] += rows
            this[name] = sum(n for _, _, n in rows) / sum(c for _, c, _ in rows)
        per_round.append(this["hqa_sft"] / this["cpt"])
    out = {}
    for name, rows in timed.items():
        wall, cpu, tokens = (sum(x[i] for x in rows) for i in range(3))
        out[name] = {"timed_steps": len(rows), "tokens": tokens, "cpu_seconds": cpu, "wall_seconds": wall,
                     "tokens_per_cpu_s": tokens / cpu, "tokens_per_wall_s": tokens / wall}
    out["hqa_over_cpt_cpu"] = out["hqa_sft"]["tokens_per_cpu_s"] / out["cpt"]["tokens_per_cpu_s"]
    out["hqa_over_cpt_wall"] = out["hqa_sft"]["tokens_per_wall_s"] / out["cpt"]["tokens_per_wall_s"]
    out["hqa_over_cpt_cpu_per_round"] = per_round
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a finished hqa synthesis (manifest.json + shards)")
    ap.add_argument("--data-config", type=Path, help="also project the generator cost of this data config")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps per run (the first is a warm-up)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each trainer, interleaved cpt/hqa, hqa/cpt, ...")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    result = {"measured": generation_ratios(a.data)}
    r = result["measured"]
    print(f"generator, measured on {a.data}: {r['calls']} calls for {r['conversation_tokens']:,} conversation tokens = "
          f"{r['calls_per_1M']:,.0f} calls, {r['prompt_tokens_per_1M']:,.0f} prompt + {r['generated_tokens_per_1M']:,.0f} "
          "generated tokens per 1M context tokens")
    if a.data_config:
        p = result["projected"] = projected_ratios(a.data_config)
        print(f"generator, projected for {a.data_config.name}: {p['calls_per_document']} calls per {p['document_tokens']:,}-token "
              f"document = {p['calls_per_1M']:,.1f} calls (<= {p['generated_tokens_per_1M_upper']:,.0f} generated tokens) per 1M")
    work = a.work or Path(tempfile.mkdtemp(prefix="hqa-bench-"))
    t = result["training"] = throughput(a.model, a.data, a.seq_len, a.steps, a.rounds, work)
    c, h = t["cpt"], t["hqa_sft"]
    print(f"training at seq_len {a.seq_len}, {a.model}, {a.rounds} interleaved rounds of {a.steps} steps (first step of each "
          f"run not timed): cpt {c['tokens_per_cpu_s']:,.0f} tok/CPU-s ({c['tokens_per_wall_s']:,.0f} tok/s wall, "
          f"{c['timed_steps']} steps), hqa_sft {h['tokens_per_cpu_s']:,.0f} tok/CPU-s ({h['tokens_per_wall_s']:,.0f} tok/s wall, "
          f"{h['timed_steps']} steps; non-padding tokens) = {t['hqa_over_cpt_cpu']:.2f}x by CPU time, "
          f"{t['hqa_over_cpt_wall']:.2f}x by wall time; per round {', '.join(f'{x:.2f}' for x in t['hqa_over_cpt_cpu_per_round'])}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.exit(main())
