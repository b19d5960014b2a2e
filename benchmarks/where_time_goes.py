"""Where the time of a paper-scale RULER run goes: generation, prefill, decode, aggregation, from measured rows.

    python benchmarks/bench_scale.py --samples 20 --shards 1 --keep --scratch /tmp/bs     # measured rows
    python benchmarks/where_time_goes.py /tmp/bs/runs-n20/*/samples.jsonl --gen-cpu-s 343 [--json out.json]

Input: the rows of a run (any backend; bench_scale's echo run is enough), which carry each sample's length,
prompt_tokens and max_new_tokens. They are scaled to --samples-per-cell (RULER: 500) per task x length.

Printed per length and in total, for two machines:
- one H100 SXM with vLLM serving an 8B model (Llama-3.1-8B shapes): prefill = FLOPs / (peak x MFU), with the
  FLOPs counted as in bench_overhead.flops_per_token (the layers' matmuls + causal attention over L/2 keys on
  average); decode = an upper bound from max_new_tokens, memory-bound: each generated token reads its own
  sequence's KV cache (L x 128 KiB for this shape in bf16) at the HBM bandwidth; the weights are shared by the
  batch and left out. Peak, bandwidth and MFU are flags: the defaults are NVIDIA's H100 SXM datasheet figures
  (989 TFLOP/s dense BF16, 3.35 TB/s) and an assumed 50% MFU for long-prompt prefill (FlashAttention-class
  kernels); the result scales as 1 / MFU.
- 2 CPU cores with the embedded model (SmolLM2-135M): prefill = FLOPs / --cpu-flops (a measured effective rate:
  bench_overhead prints ctxbench's prefill rate; the default 95 GFLOP/s per core is 273 tok/s at 3,968 tokens,
  the issue's bf16 measurement); decode from --cpu-decode-tok-s.
- generation: --gen-cpu-s (bench_scale's projected CPU time for the full protocol), the same on both machines
  (it runs on the host's CPU), divided by --gen-procs shards.
- aggregation: the CPU time to read and aggregate the rows (measured here on the given rows, scaled).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_overhead import flops_per_token  # noqa: E402

# meta-llama/Llama-3.1-8B config.json
LLAMA_8B = SimpleNamespace(hidden_size=4096, num_hidden_layers=32, intermediate_size=14336, num_attention_heads=32,
                           num_key_value_heads=8, head_dim=128)
# HuggingFaceTB/SmolLM2-135M-Instruct config.json
SMOLLM2_135M = SimpleNamespace(hidden_size=576, num_hidden_layers=30, intermediate_size=1536, num_attention_heads=9,
                               num_key_value_heads=3, head_dim=64)


def kv_bytes_per_position(config, bytes_per_value: int = 2) -> int:
    return 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * bytes_per_value


def read_cells(paths: list[Path]) -> tuple[dict[int, dict[str, float]], int, float]:
    """Per length: samples, prompt tokens, max_new_tokens; plus the row count and the CPU seconds to aggregate."""
    c0 = time.process_time()
    cells: dict[int, dict[str, float]] = defaultdict(lambda: {"samples": 0, "prompt": 0, "new": 0})
    scores: dict[tuple[str, int], list[float]] = defaultdict(list)
    rows = 0
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                rows += 1
                c = cells[int(r["length"])]
                c["samples"] += 1
                c["prompt"] += r.get("prompt_tokens") or 0
                c["new"] += r.get("max_new_tokens") or 0
                scores[(r["task"], int(r["length"]))].append(float(r.get("score") or 0.0))
    _ = {k: sum(v) / len(v) for k, v in scores.items()}  # the task x length means a report starts from
    return dict(cells), rows, time.process_time() - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", nargs="+", type=Path, help="samples*.jsonl of a run")
    ap.add_argument("--samples-per-cell", type=int, default=500, help="scale to this many samples per task x length")
    ap.add_argument("--cells-per-length", type=int, default=13, help="tasks per length (RULER: 13)")
    ap.add_argument("--gpu-tflops", type=float, default=989.0, help="peak dense BF16 TFLOP/s (H100 SXM datasheet)")
    ap.add_argument("--mfu", type=float, default=0.5, help="assumed share of the peak that prefill reaches")
    ap.add_argument("--hbm-tbs", type=float, default=3.35, help="HBM bandwidth, TB/s (H100 SXM datasheet)")
    ap.add_argument("--cpu-flops", type=float, default=95e9, help="measured effective prefill FLOP/s per CPU core")
    ap.add_argument("--cpu-cores", type=int, default=2)
    ap.add_argument("--cpu-decode-tok-s", type=float, default=10.0, help="measured decode tokens/s per process")
    ap.add_argument("--gen-cpu-s", type=float, default=None, help="projected CPU seconds of generation (bench_scale)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    cells, rows, agg_cpu = read_cells(args.rows)
    target_rows = args.samples_per_cell * args.cells_per_length * len(cells)
    scale_rows = target_rows / rows
    out: dict = {"lengths": {}, "rows_read": rows, "rows_target": target_rows}
    print(f"{rows} rows read over {len(cells)} lengths; scaled to {args.samples_per_cell} samples x "
          f"{args.cells_per_length} tasks per length = {target_rows} prompts")
    print(f"{'length':>7} {'G prompt tok':>12} {'H100 prefill h':>14} {'H100 decode<= h':>15} {'CPU prefill d':>13}")
    tot = defaultdict(float)
    for length in sorted(cells):
        c = cells[length]
        scale = args.samples_per_cell * args.cells_per_length / c["samples"]
        prompt, new = c["prompt"] * scale, c["new"] * scale
        mean_prompt = c["prompt"] / c["samples"]
        gpu_prefill = prompt * flops_per_token(LLAMA_8B, mean_prompt) / (args.gpu_tflops * 1e12 * args.mfu)
        gpu_decode = new * (mean_prompt + c["new"] / c["samples"] / 2) * kv_bytes_per_position(LLAMA_8B) / (args.hbm_tbs * 1e12)
        cpu_prefill = prompt * flops_per_token(SMOLLM2_135M, mean_prompt) / (args.cpu_flops * args.cpu_cores)
        cpu_decode = new / (args.cpu_decode_tok_s * args.cpu_cores)
        row = {"prompt_tokens": prompt, "new_tokens_max": new, "gpu_prefill_s": gpu_prefill, "gpu_decode_s": gpu_decode,
               "cpu_prefill_s": cpu_prefill, "cpu_decode_s": cpu_decode}
        out["lengths"][length] = row
        for k, v in row.items():
            tot[k] += v
        print(f"{length:>7} {prompt / 1e9:>12.3f} {gpu_prefill / 3600:>14.2f} {gpu_decode / 3600:>15.2f} {cpu_prefill / 86400:>13.1f}")
    agg = agg_cpu * scale_rows
    gen = args.gen_cpu_s
    out.update(total=dict(tot), aggregation_cpu_s=agg, generation_cpu_s=gen)
    print(f"{'total':>7} {tot['prompt_tokens'] / 1e9:>12.3f} {tot['gpu_prefill_s'] / 3600:>14.2f} "
          f"{tot['gpu_decode_s'] / 3600:>15.2f} {tot['cpu_prefill_s'] / 86400:>13.1f}")
    print(f"H100 + vLLM, 8B: prefill {tot['gpu_prefill_s'] / 3600:.1f} h at {args.mfu:.0%} of {args.gpu_tflops:.0f} TFLOP/s, "
          f"decode <= {tot['gpu_decode_s'] / 3600:.1f} h (KV reads at {args.hbm_tbs} TB/s, {tot['new_tokens_max'] / 1e6:.1f} M tokens max)")
    print(f"2 CPU cores, SmolLM2-135M: prefill {tot['cpu_prefill_s'] / 86400:.0f} days at {args.cpu_flops / 1e9:.0f} GFLOP/s per core, "
          f"decode <= {tot['cpu_decode_s'] / 86400:.1f} days at {args.cpu_decode_tok_s} tok/s per core")
    if gen is not None:
        print(f"generation: {gen / 3600:.2f} h CPU (one process; bench_scale's projection)")
    print(f"aggregation: {agg:.1f} s CPU for {target_rows} rows (measured on {rows}: {agg_cpu:.2f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
