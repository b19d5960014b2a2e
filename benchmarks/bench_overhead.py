"""The default HF configuration against a plain transformers loop and against the machine's physical bound.

    python benchmarks/bench_overhead.py --data-dir ../shared/data            # 1K, 4K, 8K; defaults as `ctxbench score`
    python benchmarks/bench_overhead.py --lengths 1024 --samples 4 --repeats 3

ctxbench runs with its defaults (dtype auto: measured per machine; batch size and threads as `ctxbench score`
picks them) through `harness.run.runner.run` on RULER samples at each length; the sample cache is filled first, so
the timing is the run loop (cached samples, tokenization, generation, scoring, store appends). Interleaved with
it, on the same prompts and the same threads:
- plain-b1: `model.generate(input_ids)` one prompt at a time, in the dtype ctxbench chose;
- plain-padded: the prompts of a length as one left-padded batch (what a batch_size > 1 loop does);
- plain-b1-<other dtype>: one prompt at the first length, to show what the dtype choice is worth.
Throughput is prompt tokens per second of wall time, end to end (prefill + greedy decode to EOS or the task's
budget). "best plain" is the fastest plain variant at that length; target: ctxbench within 10% of it.

The physical bound: prefill FLOPs per token at length L (2 x the parameters of the transformer layers, plus the
causal attention's 2 x layers x L x hidden) divided by the FLOP rate of a matmul of the model's shapes measured
here, in the same dtype and threads. ctxbench's prefill throughput (its rows' prefill_seconds) is shown as a
share of it. On a shared machine wall times are noisy: the load average is printed, and ratios are taken
within one run, from medians over --repeats.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def flops_per_token(config, length: int) -> float:
    """Prefill FLOPs per prompt token at this length: the layers' matmuls plus causal attention (average L/2 keys)."""
    h, layers = int(config.hidden_size), int(config.num_hidden_layers)
    inter = int(getattr(config, "intermediate_size", 4 * h))
    heads, kv = int(config.num_attention_heads), int(getattr(config, "num_key_value_heads", config.num_attention_heads))
    head_dim = int(getattr(config, "head_dim", h // heads) or h // heads)
    per_layer = h * heads * head_dim + 2 * h * kv * head_dim + heads * head_dim * h + 3 * h * inter  # q, k+v, o, gated MLP
    attention = 2 * heads * head_dim * (length / 2)  # QK^T and AV, MACs per token per layer
    return 2.0 * layers * (per_layer + attention)


def matmul_flops(torch, dtype, rows: int, hidden: int, inter: int) -> float:
    from ctxbench.harness.backends.cpu import time_matmul

    return 2.0 * rows * hidden * inter / time_matmul(torch, dtype, rows, hidden, inter, reps=3)


def plain_generate(backend, prompts, max_new: int, *, model=None, padded: bool = False) -> tuple[float, int]:
    """(seconds, prompt tokens) of model.generate over the prompts: one at a time, or as one left-padded batch."""
    import torch

    tok, model = backend.tokenizer, model or backend.model
    t = time.perf_counter()
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    with torch.inference_mode():
        if padded:
            batch = tok.pad({"input_ids": ids}, padding=True, return_tensors="pt").to(backend.device)
            model.generate(**batch, max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None, top_k=None,
                           pad_token_id=tok.pad_token_id)
        else:
            for x in ids:
                model.generate(torch.tensor([x], device=backend.device), max_new_tokens=max_new, do_sample=False,
                               temperature=None, top_p=None, top_k=None, pad_token_id=tok.pad_token_id)
    return time.perf_counter() - t, sum(map(len, ids))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="ruler/niah_single_2")
    ap.add_argument("--lengths", default="1024,4096,8192")
    ap.add_argument("--samples", type=int, default=2, help="samples per length")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="0: ctxbench's default (free cores)")
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    import torch
    from rich.console import Console

    from ctxbench.harness.backends.hf import HFBackend
    from ctxbench.harness.core import datasets, registry
    from ctxbench.harness.core.config import Suite, TaskSpec, build_task
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.harness.run.runner import RunPlan, run

    load0 = os.getloadavg()
    backend = HFBackend(model=args.model, threads=args.threads)  # every other setting at its default
    info = backend.info()
    print(f"load average {load0[0]:.2f}; ctxbench defaults: dtype {backend.dtype}, batch_size {backend.batch_size} "
          f"({info['batching']}), threads {backend.threads}; dtype measurement: {info.get('dtype_measured')}", flush=True)
    registry._load("backend")
    registry._REGISTRY["backend"]["bench-hf"] = lambda **_: backend  # the pre-built instance, outside the timing
    lengths = [int(x) for x in args.lengths.split(",")]
    out_dir = Path(tempfile.mkdtemp(prefix="ctxbench-overhead-"))
    quiet = Console(file=io.StringIO())
    ctx = GenContext(backend.tokenizer, PromptRenderer(backend.tokenizer), data_dir=args.data_dir)
    cells = {}
    for length in lengths:  # fill the sample cache first: generation is not what is timed here
        suite = Suite(name=f"overhead-{length}", lengths=[length], samples=args.samples, tasks=[TaskSpec(task=args.task)])
        task = build_task(suite.tasks[0], where="task")
        samples = datasets.generate(task, length=length, indices=range(args.samples), seed=suite.seed, ctx=ctx)
        cells[length] = (suite, [s.prompt for s in samples], max(s.max_new_tokens for s in samples))

    other = torch.float32 if backend.dtype == "bfloat16" else torch.bfloat16
    other_model = copy.deepcopy(backend.model).to(other)
    times: dict[tuple[int, str], list[float]] = {}
    prefill: dict[int, list[float]] = {}
    tokens: dict[int, int] = {}
    for rep in range(args.repeats):
        for length in lengths:
            suite, prompts, max_new = cells[length]
            plan = RunPlan(suite, args.model, "bench-hf", {}, out_dir, args.data_dir)
            t = time.perf_counter()
            outcome = run(plan, fresh=True, console=quiet)
            times.setdefault((length, "ctxbench"), []).append(time.perf_counter() - t)
            rows = list(outcome.store.latest().values())
            tokens[length] = sum(r["prompt_tokens"] for r in rows)
            prefill.setdefault(length, []).append(sum(r["prefill_seconds"] for r in rows))
            for name, kw in (("plain-b1", {}), ("plain-padded", {"padded": True})):
                s, _ = plain_generate(backend, prompts, max_new, **kw)
                times.setdefault((length, name), []).append(s)
            if length == lengths[0]:
                s, _ = plain_generate(backend, prompts[:1], max_new, model=other_model)
                times.setdefault((length, f"plain-b1-{str(other).split('.')[-1]}"), []).append(s * len(prompts))
            print(f"rep {rep} L={length}: " + ", ".join(f"{k[1]} {v[-1]:.1f}s" for k, v in times.items() if k[0] == length)
                  + f" (load {os.getloadavg()[0]:.1f})", flush=True)

    config = backend.model.config
    dtype = getattr(torch, backend.dtype)
    result = {"defaults": {"dtype": backend.dtype, "batch_size": backend.batch_size, "threads": backend.threads,
                           "dtype_measured": info.get("dtype_measured")}, "lengths": {}, "load_before": load0}
    print(f"\n== ctxbench defaults vs plain transformers loops ({args.model}, {args.task}, {args.samples} prompts per length, "
          f"median of {args.repeats}) ==")
    print(f"{'length':>7} {'prompt tok':>10} {'ctxbench tok/s':>14} " + " ".join(f"{n:>18}" for n in ("plain-b1", "plain-padded"))
          + f" {'vs best plain':>13} {'prefill tok/s':>13} {'bound tok/s':>11} {'of bound':>8}")
    for length in lengths:
        n = tokens[length]
        rate = {name: n / statistics.median(v) for (L, name), v in times.items() if L == length}
        best = max(v for k, v in rate.items() if k.startswith("plain"))
        bound = matmul_flops(torch, dtype, length, int(config.hidden_size), int(getattr(config, "intermediate_size", 4 * config.hidden_size))) \
            / flops_per_token(config, length)
        pre = n / statistics.median(prefill[length])
        result["lengths"][length] = {"prompt_tokens": n, "tok_per_s": rate, "best_plain": best, "ratio_vs_best_plain": rate["ctxbench"] / best,
                                     "prefill_tok_per_s": pre, "bound_tok_per_s": bound, "share_of_bound": pre / bound,
                                     "flops_per_token": flops_per_token(config, length)}
        print(f"{length:>7} {n:>10} {rate['ctxbench']:>14.1f} {rate['plain-b1']:>18.1f} {rate['plain-padded']:>18.1f} "
              f"{rate['ctxbench'] / best:>12.3f}x {pre:>13.1f} {bound:>11.1f} {100 * pre / bound:>7.1f}%")
        for name, r in rate.items():
            if name.startswith("plain-b1-"):
                print(f"{'':>7} {name}: {r:.1f} tok/s ({r / rate['plain-b1']:.2f}x the {backend.dtype} loop)")
    load1 = os.getloadavg()
    result["load_after"] = load1
    print(f"load average after: {load1[0]:.2f}; target: ctxbench >= 0.9x the best plain loop at every length")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
