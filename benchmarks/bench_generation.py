"""Benchmark our RULER sample generation against the reference RULER generator, interleaved, in CPU time.

    python benchmarks/bench_generation.py --ruler-dir /path/to/RULER [--data-dir ../shared/data] \\
        [--samples 10,500] [--lengths 65536,131072] [--compare niah_single_2,...] [--json OUT]

The reference is a RULER checkout you provide (nothing of it is copied into this repository). Both sides use
the same tokenizer (the embedded smollm2-135m model's HF directory), chat template and data, written into the
checkout: the essays as scripts/data/synthetic/json/PaulGrahamEssays.json (read exactly as our
tasks/haystacks.py reads them), SQuAD and HotpotQA (converted to the official layout, and repeated up to 1000
questions, since the reference asks question i for sample i) as json/squad.json and json/hotpotqa.json, and a
stand-in for its CWE word list where the checkout has only a Git LFS pointer. The reference runs as a subprocess
with the arguments scripts/data/prepare.py would pass; a sitecustomize on its PYTHONPATH records the CPU time
(time.process_time) of its tokenizer calls and of its sample loop, and stands in for missing nltk punkt data.

Per task, length and sample count N, the two sides alternate (reference, then ours), and report:
  ours:  CPU time of task.generate() per sample in the default mode (verify=fast), the fitting state reset at
         each length, so the first sample of each length is tokenized in full and counted; the one-time cost
         (haystack costs, tables, the additivity check) is a separate column. After timing, every sample is
         re-tokenized (not timed): within budget and prompt_tokens exact, for all N samples;
  ref:   CPU time of its sample loop per sample ("loop only": its one haystack-size search amortised away, as at
         RULER's 500 samples), and (search + loop) / N beside it;
  fill:  (prompt tokens + tokens to generate) / length, min and mean; within budget: share of samples <= length.
The headline is the loop-only ratio (ref / ours) at the largest N, with the smallest N beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_TASKS = "niah_single_2,niah_multikey_2,niah_multikey_3,vt,cwe,fwe,qa_1,qa_2"

SITECUSTOMIZE = r'''
import atexit, json, os, re, sys, time, types
_log = {"calls": [], "loop": [], "shims": []}
atexit.register(lambda: open(os.environ["CTXBENCH_REF_LOG"], "w").write(json.dumps(_log)))
def _stub(name, **attrs):
    mod = types.ModuleType(name); mod.__dict__.update(attrs); sys.modules[name] = mod; return mod
try:
    import tenacity
except ImportError:  # only the reference's Gemini tokenizer uses it
    _stub("tenacity", retry=lambda *a, **k: (lambda f: f), stop_after_attempt=lambda *a: 0, wait_fixed=lambda *a: 0, wait_random=lambda *a: 0)
    _log["shims"].append("tenacity missing: stubbed (unused by the HF tokenizer)")
try:
    import nltk, nltk.tokenize
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        from nltk.tokenize.punkt import PunktSentenceTokenizer
        _punkt = PunktSentenceTokenizer()
        nltk.tokenize.sent_tokenize = lambda text, language="english": _punkt.tokenize(text)
        _log["shims"].append("nltk punkt data missing: sent_tokenize = untrained PunktSentenceTokenizer")
except ImportError:
    _split = lambda text, language="english": [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
    _stub("nltk", data=types.SimpleNamespace(find=lambda *a, **k: None))
    sys.modules["nltk"].tokenize = _stub("nltk.tokenize", sent_tokenize=_split)
    _log["shims"].append("nltk missing: sent_tokenize = regex splitter")
sys.path.append(os.environ["CTXBENCH_REF_DATA"])
import tokenizer as _tok
_orig = _tok.HFTokenizer.text_to_tokens
def _counted(self, text):
    c0 = time.process_time(); out = _orig(self, text)
    _log["calls"].append([c0, time.process_time(), len(out)]); return out
_tok.HFTokenizer.text_to_tokens = _counted
import tqdm as _tqdm
class _Timed(_tqdm.tqdm):  # the reference's sample loop is its (last) tqdm loop
    def __iter__(self):
        c0 = time.process_time(); yield from super().__iter__(); _log["loop"].append([c0, time.process_time()])
_tqdm.tqdm = _Timed
'''


def fill_stats(fills: list[float]) -> dict:
    if not fills:
        return {}
    return {"fill_min": min(fills), "fill_mean": sum(fills) / len(fills), "within_budget": sum(f <= 1 for f in fills) / len(fills)}


def ensure_data(ruler: Path, data_dir: Path) -> None:
    """Our essays, SQuAD and HotpotQA, in the reference's file names and layouts, inside its checkout."""
    from ctxbench.tasks.haystacks import read_text_source

    json_dir = ruler / "scripts/data/synthetic/json"
    essays = json_dir / "PaulGrahamEssays.json"
    text = read_text_source(data_dir / "pg_essays")
    if not essays.exists() or json.loads(essays.read_text()).get("text") != text:
        essays.write_text(json.dumps({"text": text}))
    words = json_dir / "english_words.json"
    if words.exists() and words.read_text(errors="replace").startswith("version https://git-lfs"):
        # a checkout without Git LFS content: the reference's CWE word list (used only for lists longer than
        # wonderwords') is a pointer; stand in the distinct lowercase words of the essays and wonderwords' lists
        from ctxbench.tasks.haystacks import wonderwords_lists

        pool = sorted({w for w in re.findall(r"[a-z]+", text) if len(w) > 2} | {w for ws in wonderwords_lists().values() for w in ws})
        words.write_text(json.dumps({str(i): w for i, w in enumerate(pool)}))
        print(f"note: {words} was a Git LFS pointer; wrote a stand-in of {len(pool)} words (essays + wonderwords)", file=sys.stderr)
    squad = data_dir / "squad" / "dev-v2.0.json"
    if squad.exists() and not (json_dir / "squad.json").exists():
        (json_dir / "squad.json").write_text(squad.read_text())
    hotpot = sorted((data_dir / "hotpotqa").glob("*.json"))
    if hotpot and not (json_dir / "hotpotqa.json").exists():
        rows = json.loads(hotpot[0].read_text())
        for r in rows:  # the HF datasets layout -> the official [[title, sentences], ...]
            if isinstance(r["context"], dict):
                r["context"] = [list(p) for p in zip(r["context"]["title"], r["context"]["sentences"])]
        # the reference asks question i for sample i: repeat a small file (the same documents) up to 1000 questions
        (json_dir / "hotpotqa.json").write_text(json.dumps(rows * -(-1000 // len(rows))))


def run_reference(name, ruler, python, tok_path, chat, length, n, timeout, scratch) -> dict:
    """Run the reference generator for one RULER task and length, as scripts/data/prepare.py would."""
    cfg = yaml.safe_load((ruler / "scripts/synthetic.yaml").read_text())[name]
    base = runpy.run_path(str(ruler / "scripts/data/synthetic/constants.py"))["TASKS"][cfg["task"]]
    esc = [s.replace("{", "{{").replace("}", "}}") for s in chat]
    template = esc[0] + base["template"] + esc[1] + base.get("answer_prefix", "")
    extra = [x for k, v in cfg["args"].items() for x in (f"--{k}", str(v))]
    if cfg["task"] == "qa":
        extra += ["--pre_samples", "0"]
    save, log = scratch / f"{name}-{length}-{n}", scratch / f"{name}-{length}-{n}.log.json"
    cmd = [python, str(ruler / f"scripts/data/synthetic/{cfg['task']}.py"), "--save_dir", str(save), "--save_name", name,
           "--subset", "validation", "--tokenizer_path", tok_path, "--tokenizer_type", "hf", "--max_seq_length", str(length),
           "--tokens_to_generate", str(base["tokens_to_generate"]), "--num_samples", str(n), "--random_seed", "42", *extra,
           "--template", template]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(scratch / "shim"), os.environ.get("PYTHONPATH", "")]),
           "CTXBENCH_REF_LOG": str(log), "CTXBENCH_REF_DATA": str(ruler / "scripts/data"), "TOKENIZERS_PARALLELISM": "false"}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout}s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:200]}
    rec = json.loads(log.read_text())
    rows = [json.loads(line) for line in (save / name / "validation.jsonl").read_text().splitlines()]
    calls, (loop_start, loop_end) = rec["calls"], rec["loop"][-1]
    full = [c for c in calls if c[2] >= length / 2]
    search_full = sum(c[0] < loop_start for c in full)
    return {"n": n, "cpu_per_sample": (loop_end - calls[0][0]) / n, "search_cpu": loop_start - calls[0][0],
            "loop_cpu_per_sample": (loop_end - loop_start) / n, "tok_per_sample": len(full) / n, "search_tok": search_full,
            "loop_tok_per_sample": (len(full) - search_full) / n, "shims": rec["shims"],
            **fill_stats([r["length"] / length for r in rows])}


class Ours:
    """Our generator for one task, its caches warm after a first (timed, one-time) generation."""

    def __init__(self, name: str, tok, data_dir: Path, seed: int):
        from ctxbench.harness.core import registry
        from ctxbench.harness.core.context import GenContext
        from ctxbench.harness.core.prompting import PromptRenderer

        self.tok, self.seed = tok, seed
        self.task = registry.get("task", f"ruler/{name}")()
        self.ctx = GenContext(tok, PromptRenderer(tok, "chat"), data_dir=data_dir)  # the default mode
        c0 = time.process_time()
        self.task.generate(length=4096, index=10**6, seed=seed, ctx=self.ctx)
        self.one_time_cpu = time.process_time() - c0
        self.additive = self.task.additivity(self.ctx).additive

    def cell(self, length: int, n: int, check: bool) -> dict:
        self.ctx.fit_states.clear()  # learn afresh at each length (the first sample is tokenized in full)
        before, cpu, fills, exact = self.ctx.full_tokenizations, 0.0, [], 0
        for i in range(n):
            c0 = time.process_time()
            s = self.task.generate(length=length, index=i, seed=self.seed, ctx=self.ctx)
            cpu += time.process_time() - c0
            tokens = len(self.tok(s.prompt, add_special_tokens=s.add_special_tokens)["input_ids"]) if check else s.prompt_tokens
            exact += tokens == s.prompt_tokens
            fills.append((tokens + s.max_new_tokens) / length)
        return {"n": n, "cpu_per_sample": cpu / n, "tok_per_sample": (self.ctx.full_tokenizations - before) / n,
                "checked": n if check else 0, "exact": exact, **fill_stats(fills)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ruler-dir", type=Path, help="a checkout of https://github.com/NVIDIA/RULER (yours; never copied here)")
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data", help="holds pg_essays/, squad/, hotpotqa/")
    p.add_argument("--lengths", default="65536,131072", help="target lengths in tokens, comma-separated")
    p.add_argument("--samples", default="10,500", help="samples per task and length, one level each (headline: the largest)")
    p.add_argument("--compare", default=REFERENCE_TASKS, help="RULER tasks to run on both sides")
    p.add_argument("--model", default="smollm2-135m", help="whose tokenizer and chat template both sides use")
    p.add_argument("--python", default=sys.executable, help="interpreter for the reference (needs transformers, wonderwords, nltk)")
    p.add_argument("--timeout", type=int, default=4 * 3600, help="seconds allowed to one reference run")
    p.add_argument("--no-check", action="store_true", help="skip re-tokenizing our samples (budget and count check)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", type=Path, help="also write the numbers here (rewritten after every cell)")
    a = p.parse_args()

    ruler = a.ruler_dir
    if ruler is None or not (ruler / "scripts/data/synthetic/niah.py").exists():
        print(f"--ruler-dir: {ruler or 'not given'} is not a RULER checkout. Get one with\n"
              "  git clone https://github.com/NVIDIA/RULER DIR\nthen pass --ruler-dir DIR.", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer

    from ctxbench.harness.core.models import materialize, resolve
    from ctxbench.harness.core.prompting import PromptRenderer

    tok_path = materialize(resolve(a.model))
    tok = AutoTokenizer.from_pretrained(tok_path)
    chat = tuple(PromptRenderer(tok, "chat").render("\0").text.split("\0"))
    ensure_data(ruler, a.data_dir)
    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-") as tmp:
        return bench(a, ruler, Path(tmp), tok, tok_path, chat)


def bench(a, ruler, scratch, tok, tok_path, chat) -> int:
    (scratch / "shim").mkdir()
    (scratch / "shim" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    os.environ["CTXBENCH_CACHE"] = str(scratch / "cache")  # cold caches: the one-time costs are measured
    shared = Path(os.environ.get("CTXBENCH_MODELS_FROM", Path.home() / ".cache" / "ctxbench"))
    for sub in ("models", "fingerprints"):
        if (shared / sub).exists():
            (scratch / "cache").mkdir(exist_ok=True)
            os.symlink(shared / sub, scratch / "cache" / sub)
    tasks = [t for t in a.compare.split(",") if t]
    lengths = [int(x) for x in a.lengths.split(",")]
    levels = sorted(int(x) for x in a.samples.split(","))
    load0 = os.getloadavg()
    print(f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} on {os.cpu_count()} CPUs", flush=True)
    ours_by_task: dict[str, Ours] = {}
    cells: list[dict] = []
    shims: set[str] = set()
    for n in levels:
        for name in tasks:
            for length in lengths:
                print(f"N={n} {name} @ {length}: reference ...", end=" ", flush=True)
                ref = run_reference(name, ruler, a.python, tok_path, chat, length, n, a.timeout, scratch)
                shims.update(ref.pop("shims", []))
                print("ours ...", end=" ", flush=True)
                if name not in ours_by_task:
                    ours_by_task[name] = Ours(name, tok, a.data_dir, a.seed)
                ours = ours_by_task[name].cell(length, n, check=not a.no_check)
                ratio = ref["loop_cpu_per_sample"] / ours["cpu_per_sample"] if "error" not in ref else None
                print(f"ref loop {ref.get('loop_cpu_per_sample', float('nan')):.3f} s, ours {ours['cpu_per_sample']:.4f} s"
                      + (f" -> {ratio:.1f}x" if ratio else f" (reference failed: {ref['error']})"), flush=True)
                cells.append({"task": name, "length": length, "n": n, "ours": ours, "reference": ref, "loop_ratio": ratio})
                if a.json:
                    write_json(a.json, a, cells, ours_by_task, shims, load0)
    report(cells, ours_by_task, levels, lengths, tasks, shims)
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if a.json:
        write_json(a.json, a, cells, ours_by_task, shims, load0, load1)
    return 0


def write_json(path: Path, a, cells, ours_by_task, shims, *loads) -> None:
    path.write_text(json.dumps({"model": a.model, "lengths": a.lengths, "samples": a.samples, "shims": sorted(shims),
                                "one_time_cpu": {k: v.one_time_cpu for k, v in ours_by_task.items()},
                                "additive": {k: v.additive for k, v in ours_by_task.items()}, "cells": cells,
                                "load_average": loads}, indent=1))


def report(cells, ours_by_task, levels, lengths, tasks, shims) -> None:
    def pct(x):
        return f"{100 * x:.2f}%" if x is not None else "-"

    print("\n== RULER generation: ours (default, verify=fast) vs the reference, CPU time per sample ==")
    print(f"{'task':16} {'length':>7} {'N':>4} {'ours s':>8} {'ref loop s':>10} {'ref (search+loop)/N':>20} {'loop ratio':>10} "
          f"{'fill min ours/ref':>18} {'in budget ours/ref':>19} {'tok/sample ours/ref':>20}")
    for c in cells:
        o, r = c["ours"], c["reference"]
        if "error" in r:
            print(f"{c['task']:16} {c['length']:>7} {c['n']:>4} {o['cpu_per_sample']:>8.4f}  reference failed: {r['error']}")
            continue
        print(f"{c['task']:16} {c['length']:>7} {c['n']:>4} {o['cpu_per_sample']:>8.4f} {r['loop_cpu_per_sample']:>10.3f} "
              f"{r['cpu_per_sample']:>20.3f} {c['loop_ratio']:>9.1f}x {pct(o.get('fill_min')):>8}/{pct(r.get('fill_min')):<9} "
              f"{pct(o.get('within_budget')):>9}/{pct(r.get('within_budget')):<9} {o['tok_per_sample']:>9.3f}/{r['tok_per_sample']:<9.2f}")
    big, small = levels[-1], levels[0]
    print(f"\nheadline: loop-only ratio (reference loop / ours) at N={big}" + (f", N={small} in brackets" if small != big else ""))
    by = {(c["task"], c["length"], c["n"]): c for c in cells}
    for name in tasks:
        parts = []
        for length in lengths:
            c, d = by.get((name, length, big)), by.get((name, length, small))
            if c and c["loop_ratio"]:
                parts.append(f"{length // 1024}K {c['loop_ratio']:.1f}x" + (f" (N={small}: {d['loop_ratio']:.1f}x)" if d and d is not c and d["loop_ratio"] else ""))
        ours = [by[k]["ours"] for k in by if k[0] == name]
        checked = sum(o["checked"] for o in ours)
        inside = sum(round(o.get("within_budget", 0) * o["n"]) for o in ours if o["checked"])
        exact = sum(o["exact"] for o in ours if o["checked"])
        print(f"  {name:16} " + ", ".join(parts) + f"; ours within budget {inside}/{checked}, prompt_tokens exact {exact}/{checked}; "
              f"one-time {ours_by_task[name].one_time_cpu:.2f} s CPU; additive: {ours_by_task[name].additive}")
    for s in sorted(shims):
        print(f"reference shim: {s}")


if __name__ == "__main__":
    sys.exit(main())
