"""Batched decode on CPU (hf backend): one prompt at a time against prompts prefilled alone and decoded together.

    python benchmarks/batched_decode.py [--suite ruler-quick] [--data-dir ../shared/data] [--tasks 'ruler/niah*']
        [--lengths 1024] [--threads 1] [--batch 8] [--json OUT]
    python benchmarks/batched_decode.py --compare BEFORE/samples.jsonl AFTER/samples.jsonl   # two `score` runs

The suite's samples (built as `ctxbench score` builds them) go through one HFBackend (SmolLM2-135M, fp32) in three
ways, interleaved group by group (a group: `--batch` consecutive samples of one length), so that a change of
machine load hits every way alike:
  alone:     batched_decode off, one request per generate() call (the CPU path before batched decode);
  per cell:  batched decode, one call per task x length within the group (what the run loop asks today: a cell's
             samples share a call, so ruler-quick's 2 samples per cell decode 2 at a time);
  across:    batched decode, the whole group in one call (cells of one length decoded together).
Printed: the model seconds of each way, prefill and decode apart (the backend's own split), their ratios to alone,
and whether the greedy answers are identical to alone's (the ids that differ are listed).
--compare reads two runs' rows instead: model seconds (prefill, decode) of each and whether every prediction agrees.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path


def build_samples(suite_name: str, data_dir: str, tasks: str | None, lengths: str | None) -> list:
    """(task name, Sample) pairs of the suite, in the run's cell order."""
    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.config import load_suite, select_tasks
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.harness.core.prompting import PromptRenderer
    from ctxbench.harness.run.planning import plan_cells

    suite = load_suite(suite_name)
    suite = select_tasks(suite, tasks) if tasks else suite
    if lengths:
        suite = suite.model_copy(update={"lengths": [int(x) for x in lengths.split(",")]})
    tok = load_tokenizer("smollm2-135m")
    ctx = GenContext(tok, PromptRenderer(tok, suite.template), data_dir=Path(data_dir))
    cells, _ = plan_cells(suite, ctx)
    out = []
    for cell in cells:
        for s in datasets.iter_samples(cell.task, length=cell.length, indices=cell.indices, seed=suite.seed, ctx=ctx):
            out.append((cell.task.name, s))
    return out


def request_of(s):
    from ctxbench.harness.core.types import Request

    return Request(s.id, s.prompt, s.max_new_tokens, s.add_special_tokens, s.prompt_tokens, s.user_text,
                   s.answer_prefix, turns=s.turns)


def run_way(backend, way: str, group: list) -> tuple[list, float]:
    """The predictions of one group scored one way, and the wall seconds it took."""
    backend.batched_decode, backend.batch_size = (False, 1) if way == "alone" else (True, len(group))
    if way == "alone":
        calls = [[s] for _, s in group]
    elif way == "per cell":
        by_cell: dict[str, list] = defaultdict(list)
        for task, s in group:
            by_cell[task].append(s)
        calls = list(by_cell.values())
    else:
        calls = [[s for _, s in group]]
    start = time.perf_counter()
    preds = [p for call in calls for p in backend.generate([request_of(s) for s in call])]
    return preds, time.perf_counter() - start


def groups_of(samples: list, size: int) -> list[list]:
    """Consecutive runs of `size` samples of one length."""
    by_length: dict[int, list] = defaultdict(list)
    for task, s in samples:
        by_length[s.length].append((task, s))
    return [items[i: i + size] for items in by_length.values() for i in range(0, len(items), size)]


def compare(before: str, after: str) -> dict:
    """Two runs' rows side by side: summed model seconds (prefill, decode apart) and the ids whose predictions differ."""
    rows = [{r["id"]: r for r in map(json.loads, open(path).read().splitlines())} for path in (before, after)]
    out = {}
    for name, run in zip(("before", "after"), rows):
        out[name] = {k: round(sum(r.get(k) or 0 for r in run.values()), 2) for k in ("seconds", "prefill_seconds", "decode_seconds")}
        print(f"{name:6s} {len(run)} rows  model {out[name]['seconds']:.1f}s  prefill {out[name]['prefill_seconds']:.1f}s  "
              f"decode {out[name]['decode_seconds']:.1f}s")
    differ = sorted(i for i in rows[0] if rows[0][i]["prediction"] != rows[1].get(i, {}).get("prediction"))
    out["answers_differ"] = differ
    print(f"model time {out['before']['seconds'] / out['after']['seconds']:.2f}x less after; predictions differ: {differ or 'none'}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="ruler-quick")
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--tasks", default=None)
    ap.add_argument("--lengths", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--json", default=None)
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), default=None)
    a = ap.parse_args(argv)
    if a.compare:
        compare(*a.compare)
        return 0
    from ctxbench.harness.backends.hf import HFBackend

    samples = build_samples(a.suite, a.data_dir, a.tasks, a.lengths)
    backend = HFBackend(model="smollm2-135m", device="cpu", dtype="float32", threads=a.threads,
                        prefix_reuse=False)  # decode alone is measured: no prompt starts from a kept prefix
    ways = ("alone", "per cell", "across")
    totals = {w: defaultdict(float) for w in ways}
    texts: dict[str, dict[str, str]] = {w: {} for w in ways}
    for k, group in enumerate(groups_of(samples, a.batch)):
        for way in ways[k % 3:] + ways[: k % 3]:  # rotate the order, so no way always runs first
            preds, wall = run_way(backend, way, group)
            totals[way]["wall"] += wall
            totals[way]["prefill"] += sum(p.prefill_seconds or 0 for p in preds)
            totals[way]["decode"] += sum(p.decode_seconds or 0 for p in preds)
            totals[way]["tokens"] += sum(p.generated_tokens for p in preds)
            texts[way].update({p.sample_id: p.text for p in preds})
        print(f"group {k + 1}: {len(group)} samples at {group[0][1].length}: "
              + ", ".join(f"{w} {totals[w]['wall']:.1f}s" for w in ways), flush=True)
    report = {"samples": len(samples), "threads": a.threads, "batch": a.batch, "ways": {}}
    for w in ways:
        t = totals[w]
        differ = sorted(i for i, text in texts[w].items() if text != texts["alone"][i])
        report["ways"][w] = {**{k: round(v, 2) for k, v in t.items()}, "vs_alone": round(totals["alone"]["wall"] / t["wall"], 2),
                             "answers_differ": differ}
        print(f"{w:9s} wall {t['wall']:7.1f}s  prefill {t['prefill']:7.1f}s  decode {t['decode']:7.1f}s  "
              f"{int(t['tokens'])} tokens  {totals['alone']['wall'] / t['wall']:.2f}x  answers differ: {differ or 'none'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
