"""LOGO training memory and step time: synthetic positions vs full-length input at equal K, M = 1, 2, 3 (Fig. 6c).

    python benchmarks/logo_memory.py [--window 4096] [--real 512] [--layers 4] [--rejected 1,2,3] [--steps 2]
        [--device cpu|cuda] [--trainable embed,norm] [--json OUT]

One training step = the LOGO objective on the M + 1 responses of one sample (forward, backward, AdamW update), through
the trainer's own code (trainers/logo: response_rewards, logo_loss, LoRA r=32 with embeddings and norms trained,
gradient checkpointing on, the attention mask passed). Two inputs with the same positional extent K:
  synthetic: k real tokens (--real) whose position ids spread over [0, K) as `ctxbench data logo` writes them;
  full:      K real tokens with positions 0..K-1 (what training at K without position synthesis costs).
Both hold the same answers (--answer tokens per response). The model is SmolLM2-135M's shape with --layers layers
(random weights: memory and time do not depend on them). Each (mode, M) runs in a fresh subprocess. Memory is the peak
after the timed steps: on CPU, live tensor bytes in PyTorch's profiler memory timeline ("step": the peak over a whole
step, parameters, gradients and AdamW state included; "input-dependent": the peak of activations, inputs and
temporaries over forward + backward alone, where the input size matters); on CUDA, max_memory_allocated over a step,
and its rise over the allocation before forward + backward. Peak RSS is not used: on a shared machine the allocator's page reuse made it non-monotone in the input size.
Time: mean wall and process CPU seconds of --steps steps after one warm-up step (CPU time is steadier on a shared
machine). Printed per M: both inputs' memory and time, and the full/synthetic ratios.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOL = {"hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3,
        "vocab_size": 49152, "tie_word_embeddings": True, "rope_theta": 100000.0}


def batch(mode: str, rejected: int, window: int, real: int, answer: int, seed: int = 0):
    """The M + 1 rows of one sample: ids, labels on the answers, mask, and synthetic or plain positions."""
    import numpy as np
    import torch

    from ctxbench.trainers.logo.positions import Layout, prefix_positions, response_positions

    rng = np.random.default_rng(seed)
    head, tail, chunks = 16, 16, 8
    length = real if mode == "synthetic" else window
    body = length - head - tail - answer
    sizes = tuple([body // chunks] * (chunks - 1) + [body - (body // chunks) * (chunks - 1)])
    if mode == "synthetic":
        pos = response_positions(prefix_positions(Layout(head, sizes, tail, (answer,)), window, "continuous", rng), answer)
    else:
        pos = np.arange(length)
    rows = rejected + 1
    ids = torch.from_numpy(rng.integers(0, SMOL["vocab_size"], (rows, length)))
    ids[:, : length - answer] = ids[0, : length - answer]  # one shared prompt
    labels = torch.full_like(ids, -100)
    labels[:, length - answer:] = ids[:, length - answer:]
    return {"input_ids": ids, "labels": labels, "attention_mask": torch.ones_like(ids),
            "position_ids": torch.from_numpy(np.asarray(pos)).expand(rows, -1).contiguous()}


def child(args) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from ctxbench.trainers.logo.lora import LoraSpec, wrap
    from ctxbench.trainers.logo.loss import logo_loss
    from ctxbench.trainers.logo.trainer import response_rewards

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = AutoConfig.for_model("llama", num_hidden_layers=args.layers, max_position_embeddings=args.window, **SMOL)
    spec = LoraSpec(trainable=[x for x in args.trainable.split(",") if x])
    model = wrap(AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa"), spec).to(args.device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    data = {k: v.to(args.device) for k, v in batch(args.mode, args.rejected_one, args.window, args.real, args.answer).items()}
    cuda = args.device.startswith("cuda")

    def step(inputs, update: bool = True) -> None:
        chosen, rejected, _ = response_rewards(model, inputs, group=args.rejected_one + 1)
        logo_loss(chosen, rejected, beta=10.0, gamma=3.0, sft_weight=0.1).loss.backward()
        if update:
            opt.step()
        opt.zero_grad(set_to_none=True)

    step({k: v[:, -2 * args.answer:] for k, v in data.items()})  # a tiny step: AdamW state now exists
    times, cpu = [], []
    for i in range(args.steps + 1):
        start, start_cpu = time.perf_counter(), time.process_time()
        step(data)
        if cuda:
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    memory = cuda_peak(step, data) if cuda else cpu_peak(step, data)
    print(json.dumps({**memory, "seconds": sum(times) / len(times), "cpu_seconds": sum(cpu) / len(cpu),
                      "tokens": int(data["attention_mask"].sum())}))


def cpu_peak(step, data) -> dict[str, float]:
    """From the profiler's memory timeline (live tensor bytes): the peak over a whole step (parameters, gradients and
    AdamW state included), and the peak of activations, inputs and temporaries over forward + backward alone."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, Category, MemoryProfileTimeline

    def timeline(**kw) -> np.ndarray:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
            step(data, **kw)
        return np.asarray(MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))[1], np.float64)

    fixed = [_CATEGORY_TO_INDEX[c] + 1 for c in (Category.PARAMETER, Category.GRADIENT, Category.OPTIMIZER_STATE)]
    backward = timeline(update=False)
    activations = backward.sum(axis=1) - backward[:, fixed].sum(axis=1)
    return {"step_mib": float(timeline().sum(axis=1).max()) / 2**20, "input_mib": float(activations.max()) / 2**20}


def cuda_peak(step, data) -> dict[str, float]:
    import torch

    def peak(**kw) -> tuple[int, int]:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step(data, **kw)
        torch.cuda.synchronize()
        return base, torch.cuda.max_memory_allocated()

    base, top = peak(update=False)
    return {"step_mib": peak()[1] / 2**20, "input_mib": (top - base) / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--window", type=int, default=4096, help="K: the positional extent of both inputs")
    ap.add_argument("--real", type=int, default=512, help="k: real tokens of the synthetic-position input")
    ap.add_argument("--answer", type=int, default=32, help="answer tokens per response")
    ap.add_argument("--layers", type=int, default=4, help="decoder layers (SmolLM2-135M has 30)")
    ap.add_argument("--rejected", default="1,2,3", help="M values")
    ap.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trainable", default="embed,norm", help="modules trained in full besides LoRA ('' = LoRA only: the "
                    "embedding's two dense vocab x hidden gradients no longer set a floor under the activation peak)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--rejected-one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        return child(args)
    rows = []
    for m in [int(x) for x in args.rejected.split(",")]:
        got = {}
        for mode in ("synthetic", "full"):
            cmd = [sys.executable, __file__, "--mode", mode, "--rejected-one", str(m), "--window", str(args.window),
                   "--real", str(args.real), "--answer", str(args.answer), "--layers", str(args.layers),
                   "--steps", str(args.steps), "--device", args.device, f"--trainable={args.trainable}"]
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
            got[mode] = json.loads(res.stdout.strip().splitlines()[-1])
        s, f = got["synthetic"], got["full"]
        ratio = {k: f[k] / max(s[k], 1e-9) for k in ("step_mib", "input_mib", "seconds", "cpu_seconds")}
        rows.append({"M": m, "synthetic": s, "full": f, "full_over_synthetic": ratio})
        print(f"M={m}: synthetic {s['tokens']} tok: step {s['step_mib']:.0f} MiB (input-dependent {s['input_mib']:.0f}), "
              f"{s['seconds']:.2f} s ({s['cpu_seconds']:.2f} CPU s) | full {f['tokens']} tok: step {f['step_mib']:.0f} MiB "
              f"(input-dependent {f['input_mib']:.0f}), {f['seconds']:.2f} s ({f['cpu_seconds']:.2f} CPU s) | full/synthetic: "
              f"step memory x{ratio['step_mib']:.2f}, input-dependent x{ratio['input_mib']:.2f}, time x{ratio['seconds']:.2f} "
              f"(CPU x{ratio['cpu_seconds']:.2f})", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: v for k, v in vars(args).items() if k not in ("mode", "rejected_one", "json")},
                                         "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
