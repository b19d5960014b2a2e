"""How much of a cell's prompt tokens a prefix cache can reuse when the cell's prompts are sent sorted.

    python benchmarks/prefix_share.py --length 8192 --samples 20 [--data-dir ../shared/data]

Per RULER task: generate N samples at one length (default mode, smollm2-135m, chat template), sort the prompts
as the runner sorts a chunk, tokenize them, and count, for each prompt, the tokens it shares with the previous
one, rounded down to whole 16-token blocks (vLLM's default block size). Printed: reused / all prompt tokens.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TASKS = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
         "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2"]


def main(argv=None) -> int:
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.harness.core.prompting import PromptRenderer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--length", type=int, default=8192)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--block", type=int, default=16, help="prefix-cache block size in tokens")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = ap.parse_args(argv)
    tok = load_tokenizer(args.model)
    total = reused = 0
    for name in TASKS:
        task = registry.get("task", f"ruler/{name}")()
        ctx = GenContext(tok, PromptRenderer(tok, "chat"), data_dir=args.data_dir)
        prompts = sorted(task.generate(length=args.length, index=i, seed=42, ctx=ctx).prompt for i in range(args.samples))
        ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        t = r = 0
        for prev, cur in zip([None, *ids], ids):
            t += len(cur)
            if prev is not None:
                k = next((j for j, (a, b) in enumerate(zip(prev, cur)) if a != b), min(len(prev), len(cur)))
                r += k // args.block * args.block
        total, reused = total + t, reused + r
        print(f"{name:16} {args.length} x {args.samples}: reusable {r / t:.1%}", flush=True)
    print(f"all {len(TASKS)} tasks: reusable {reused / total:.1%} of {total} prompt tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
