"""Benchmark hierarchical-QA synthesis and training: what the data costs, and what answer-only SFT costs.

    python benchmarks/hqa_generation.py --data hqa-data/tiny [--data-config configs/data/hqa-paper-180k.yaml]
        [--model smollm2-135m] [--seq-len 2048] [--steps 3] [--json OUT]

1. Generator cost per 1M tokens of training context, measured from a finished synthesis (its manifest counts
   every distinct generator call and its prompt/generated tokens): calls, prompt tokens and generated tokens per
   1M conversation tokens. With --data-config, also the same ratios projected for that config from its sizes
   (per document: its small chunks + medium sections + 1 summaries and its hierarchical + diverse QAs, first
   attempts only; a document contributes its token budget to one conversation on average).
2. hqa_sft vs cpt training throughput at equal seq_len on the same model: non-padding tokens per second over
   --steps optimizer steps (batch 1, fp32, 1 thread), timed by the shared loop (the manifests' seconds: model
   building and data preparation excluded). cpt trains on standard-packed stdlib code of exactly seq_len tokens;
   hqa_sft on the conversations of --data (answer-only loss, LM head at answer positions only).
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


def throughput(model: str, data: Path, seq_len: int, steps: int, work: Path) -> dict:
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer
    from ctxbench.trainers.data.corpus import resolve_corpus
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.hqa.trainer import HQASFTConfig, HQASFTTrainer

    common = {"base_model": model, "store": str(work / "runs"), "per_device_batch_size": 1, "learning_rate": 1e-5,
              "save_steps": 1000, "threads": 1, "precision": "fp32", "seed": 0}
    corpus = resolve_corpus({"path": "stdlib:json,email"}, work)
    packed = work / "packed"
    synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=seq_len, budget_tokens=seq_len * (steps + 2),
                               tokenizer=model if not Path(model).is_dir() else "smollm2-135m", seed=0, out_dir=str(packed)))
    out = {}
    cpt = CPTTrainer(CPTConfig(**common, max_steps=steps, data={"path": str(packed), "eval_sequences": 0})).train()
    out["cpt"] = {"tokens": cpt.tokens, "seconds": cpt.seconds, "tokens_per_s": cpt.tokens / cpt.seconds}
    hqa = HQASFTTrainer(HQASFTConfig(**common, stages=[{"name": "bench", "data": str(data), "seq_len": seq_len,
                                                         "max_steps": steps}])).train()
    manifest = json.loads((hqa.checkpoint / "ctxbench_manifest.json").read_text())
    out["hqa_sft"] = {"tokens": hqa.tokens, "answer_tokens": manifest["answer_tokens"]["trained"], "seconds": hqa.seconds,
                      "tokens_per_s": hqa.tokens / hqa.seconds}
    out["hqa_over_cpt"] = out["hqa_sft"]["tokens_per_s"] / out["cpt"]["tokens_per_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a finished hqa synthesis (manifest.json + shards)")
    ap.add_argument("--data-config", type=Path, help="also project the generator cost of this data config")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=3)
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
    t = result["training"] = throughput(a.model, a.data, a.seq_len, a.steps, work)
    print(f"training at seq_len {a.seq_len}, {a.steps} steps of {a.model}: cpt {t['cpt']['tokens_per_s']:,.0f} tok/s, "
          f"hqa_sft {t['hqa_sft']['tokens_per_s']:,.0f} tok/s (non-padding; {t['hqa_sft']['answer_tokens']:,} answer tokens) "
          f"= {t['hqa_over_cpt']:.2f}x")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.exit(main())
