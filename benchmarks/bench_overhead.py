"""Harness overhead: end-to-end `ctxbench score` time vs the raw backend on the same prompts.

    python benchmarks/bench_overhead.py --data-dir ../shared/data                 # HF on CPU (small)
    python benchmarks/bench_overhead.py --backend vllm --lengths 4096,8192 --samples 20   # on a GPU

What is timed:

- **harness**: `harness.runner.run()` with a fresh store and warm sample cache: reading the cached samples,
  rendering checks, batching, the backend's tokenization/truncation/padding/decoding, scoring, and the
  fsynced store appends. The backend is built once outside the timing (model loading is the same for
  both sides), by registering the pre-built instance under a bench-only name.
- **raw**: the same model called directly on the same token ids in the same batches the harness sent
  (recorded from the backend during the first run): `model.generate` on the left-padded batch for HF,
  `llm.generate` on the same TokensPrompts and SamplingParams for vLLM. Tokenization happens before
  the timer starts, so raw is a lower bound.

Harness and raw runs alternate (`--repeats`, after one warm-up of each) and the table shows medians;
overhead = harness / raw - 1 (target: <= 3%). On a shared machine two runs of the same generate calls
differ by several percent, so the table also shows the **in-run** overhead: harness wall time over the
time spent inside the model's own generate calls *during that same harness run* (model.generate for HF,
llm.generate for vLLM, timed by a wrapper), which is immune to run-to-run noise.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def build_suite(args):
    from ctxbench.harness.core.config import Suite, TaskSpec

    tasks = [TaskSpec(task=t, args={"tokens_to_generate": args.tokens_to_generate}) for t in args.tasks.split(",")]
    return Suite(name="bench-overhead", lengths=[int(x) for x in args.lengths.split(",")], samples=args.samples, tasks=tasks)


def make_backend(args):
    if args.backend == "hf":
        from ctxbench.harness.backends.hf import HFBackend

        return HFBackend(model=args.model, dtype=args.dtype, threads=args.threads, batch_size=args.batch_size, device=args.device)
    from ctxbench.harness.backends.vllm_engine import VLLMBackend

    return VLLMBackend(model=args.model, max_model_len=args.max_model_len, gpu_memory_utilization=0.5,
                       batch_size=args.batch_size or 512)


class Recorder:
    """Wraps backend.generate: records each batch of requests and the time spent inside the backend."""

    def __init__(self, backend):
        self.backend = backend
        self.inner = backend.generate
        self.batches: list = []
        self.seconds = 0.0
        self.recording = True
        backend.generate = self

    def __call__(self, requests):
        t = time.perf_counter()
        out = self.inner(requests)
        self.seconds += time.perf_counter() - t
        if self.recording:
            self.batches.append(list(requests))
        return out


class Timed:
    """Wraps the model's generate to sum the time spent inside it."""

    def __init__(self, fn):
        self.fn = fn
        self.seconds = 0.0

    def __call__(self, *a, **kw):
        t = time.perf_counter()
        try:
            return self.fn(*a, **kw)
        finally:
            self.seconds += time.perf_counter() - t


def wrap_model(backend) -> Timed:
    if hasattr(backend, "model"):  # HF
        timed = Timed(backend.model.generate)
        backend.model.generate = timed
    else:  # vLLM, one engine in this process
        timed = Timed(backend.llm.generate)
        backend.llm.generate = timed
    return timed


def raw_hf(backend, batches):
    """model.generate on the same left-padded token ids, batch by batch; returns seconds in generate."""
    import torch

    tok, model = backend.tokenizer, backend.model
    prepared = []
    for batch in batches:
        ids = [tok(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"] for r in batch]
        padded = tok.pad({"input_ids": ids}, padding=True, return_tensors="pt").to(backend.device)
        prepared.append((padded, max(r.max_new_tokens for r in batch)))
    total = 0.0
    for padded, max_new in prepared:
        t = time.perf_counter()
        with torch.inference_mode():
            model.generate(**padded, max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None, top_k=None,
                           pad_token_id=tok.pad_token_id)
        total += time.perf_counter() - t
    return total


def raw_vllm(backend, batches):
    from ctxbench.harness.backends.ordering import prefix_order
    from ctxbench.harness.backends.vllm_engine import run_llm

    prepared = []
    for batch in batches:
        ids, _ = backend.encode(batch)
        order = prefix_order(ids)
        prepared.append(([ids[i] for i in order], [batch[i].max_new_tokens for i in order]))
    total = 0.0
    for ids, max_tokens in prepared:
        t = time.perf_counter()
        run_llm(backend.llm, backend.vllm, ids, max_tokens, backend.stop_ids)
        total += time.perf_counter() - t
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tasks", default="ruler/niah_single_1,ruler/niah_single_2,ruler/niah_multikey_1")
    ap.add_argument("--tokens-to-generate", type=int, default=32, help="generation budget of every task")
    ap.add_argument("--lengths", default="512,1024")
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--dtype", default="float32", help="HF: float32 is fastest on most CPUs")
    ap.add_argument("--threads", type=int, default=0, help="HF: torch threads (0: torch's default)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--max-model-len", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from ctxbench.harness.core import registry
    from ctxbench.harness.runner import RunPlan, run

    suite = build_suite(args)
    t = time.perf_counter()
    backend = make_backend(args)
    load_s = time.perf_counter() - t
    rec = Recorder(backend)
    timed = wrap_model(backend)
    name = f"bench-{args.backend}"
    registry._load("backend")
    registry._REGISTRY["backend"][name] = lambda **_: backend  # the pre-built instance, outside the timing
    quiet = Console(file=io.StringIO())
    out_dir = Path(tempfile.mkdtemp(prefix="ctxbench-bench-"))
    plan = RunPlan(suite, args.model, name, {}, out_dir, args.data_dir)
    raw_fn = raw_hf if args.backend == "hf" else raw_vllm

    t = time.perf_counter()
    store = run(plan, fresh=True, console=quiet)  # warm-up: generates (and caches) samples, records the batches
    first_s = time.perf_counter() - t
    rec.recording = False
    batches = rec.batches
    n_req = sum(len(b) for b in batches)
    rows = list(store.latest().values())
    raw_fn(backend, batches)  # warm-up of the raw path

    harness_s, raw_s, inside_s, model_s = [], [], [], []
    for _ in range(args.repeats):
        rec.seconds = timed.seconds = 0.0
        t = time.perf_counter()
        run(plan, fresh=True, console=quiet)
        harness_s.append(time.perf_counter() - t)
        inside_s.append(rec.seconds)
        model_s.append(timed.seconds)
        raw_s.append(raw_fn(backend, batches))
    inrun = [h_ / m_ - 1 for h_, m_ in zip(harness_s, model_s)]

    h, r = statistics.median(harness_s), statistics.median(raw_s)
    result = {
        "backend": args.backend, "model": args.model, "device": getattr(backend, "device", "cuda"),
        "tasks": args.tasks, "lengths": args.lengths, "requests": n_req, "batches": len(batches),
        "prompt_tokens": sum(x["prompt_tokens"] for x in rows), "generated_tokens": sum(x["generated_tokens"] for x in rows),
        "model_load_s": round(load_s, 2), "first_run_s (incl. sample generation)": round(first_s, 2),
        "raw_s": [round(x, 3) for x in raw_s], "harness_s": [round(x, 3) for x in harness_s],
        "backend_generate_s": [round(x, 3) for x in inside_s],
        "raw_median_s": round(r, 3), "harness_median_s": round(h, 3), "ratio": round(h / r, 4),
        "overhead_pct": round(100 * (h / r - 1), 2), "overhead_pct_best": round(100 * (min(harness_s) / min(raw_s) - 1), 2),
        "model_generate_in_harness_s": [round(x, 3) for x in model_s],
        "inrun_overhead_pct": [round(100 * x, 2) for x in inrun], "inrun_overhead_pct_median": round(100 * statistics.median(inrun), 2),
    }
    table = Table(title=f"harness overhead: {args.backend} {args.model} ({n_req} requests in {len(batches)} batches, "
                        f"{result['prompt_tokens']} prompt + {result['generated_tokens']} generated tokens)")
    for col in ("", "median s", "min s", "runs s"):
        table.add_column(col, justify="right" if col else "left")
    for label, xs in (("raw generate (separate replay)", raw_s), ("model generate inside harness run", model_s),
                      ("backend.generate (in harness)", inside_s), ("harness run()", harness_s)):
        table.add_row(label, f"{statistics.median(xs):.3f}", f"{min(xs):.3f}", " ".join(f"{x:.2f}" for x in xs))
    table.add_row("ratio harness / raw replay", f"{h / r:.4f}", f"{min(harness_s) / min(raw_s):.4f}", "")
    table.add_row("overhead vs raw replay", f"{100 * (h / r - 1):+.2f}%", f"{100 * (min(harness_s) / min(raw_s) - 1):+.2f}%",
                  "noisy on a shared machine")
    table.add_row("overhead in-run (harness / its generate calls)", f"{100 * statistics.median(inrun):+.2f}%",
                  f"{100 * min(inrun):+.2f}%", " ".join(f"{100 * x:+.2f}%" for x in inrun) + "  target <= 3%")
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
