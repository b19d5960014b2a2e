"""Benchmark our RULER sample generation against the reference RULER generator, in one run.

    python benchmarks/bench_generation.py --ruler-dir /path/to/RULER [--data-dir ../shared/data] \
        [--lengths 4096,16384,65536,131072] [--samples N] [--json OUT]

Both sides use the same tokenizer (the embedded smollm2-135m model's HF directory) and the same
essay haystack (data_dir/pg_essays/*.txt, sorted and joined with blank lines: written into the
RULER checkout as scripts/data/synthetic/json/PaulGrahamEssays.json). The reference runs as a
subprocess with the arguments scripts/data/prepare.py would pass, its prompt template wrapped in our
model's chat template so both fill the same budget. A sitecustomize on the subprocess's PYTHONPATH
times and counts its tokenizer calls; it also stands in for missing nltk punkt data or packages.

Measured, per task and length, over N samples (default 10 below 64K, 3 from 64K):
  ours: wall time of task.generate() per sample, after one warm-up generation in a cold cache
        (reported separately as the one-time cost) and with the fitting state reset per length;
  ref:  from the start of its first tokenizer call to the end of its sample loop (its haystack-size
        binary search + N samples), divided by N; python start-up, imports and tokenizer load are
        excluded. "excl. search" is the loop alone per sample, i.e. the search amortised away;
  fill: (prompt tokens + tokens to generate) / length, min and mean over the samples;
  tok/sample: tokenizations of at least half the target length, per sample.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
    t0 = time.perf_counter(); out = _orig(self, text)
    _log["calls"].append([t0, time.perf_counter(), len(out)]); return out
_tok.HFTokenizer.text_to_tokens = _counted
import tqdm as _tqdm
class _Timed(_tqdm.tqdm):  # the reference's sample loop is its one tqdm loop
    def __iter__(self):
        t0 = time.perf_counter(); yield from super().__iter__(); _log["loop"].append([t0, time.perf_counter()])
_tqdm.tqdm = _Timed
'''


def fill_stats(fills: list[float]) -> dict:
    return {"fill_min": min(fills), "fill_mean": sum(fills) / len(fills)} if fills else {}


def ensure_essays(ruler: Path, data_dir: Path) -> None:
    """Write our haystack (read exactly as tasks/haystacks.py reads it) into the RULER checkout."""
    from ctxbench.tasks.haystacks import read_text_source

    target = ruler / "scripts/data/synthetic/json/PaulGrahamEssays.json"
    text = read_text_source(data_dir / "pg_essays")
    if not target.exists() or json.loads(target.read_text()).get("text") != text:
        target.write_text(json.dumps({"text": text}))


def run_ours(name: str, tok, data_dir: Path, lengths: list[int], samples, seed: int, verify: str = "full") -> dict:
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.prompting import PromptRenderer

    task = registry.get("task", name)()
    ctx = GenContext(tok, PromptRenderer(tok, "chat"), data_dir=data_dir, verify=verify)
    t0 = time.perf_counter()
    task.generate(length=lengths[0], index=10**6, seed=seed, ctx=ctx)  # warm-up: fills the caches
    out = {"one_time_s": time.perf_counter() - t0, "lengths": {}}
    for length in lengths:
        ctx.fit_states.clear()  # learn the fit afresh at each length, as the reference searches afresh
        n, before, fills, t0 = samples(length), ctx.full_tokenizations, [], time.perf_counter()
        try:
            for i in range(n):
                s = task.generate(length=length, index=i, seed=seed, ctx=ctx)
                fills.append((s.prompt_tokens + s.max_new_tokens) / length)
        except Exception as e:  # noqa: BLE001 - a task too long for a length, or under construction
            out["lengths"][length] = {"error": f"{type(e).__name__}: {e}"[:200]}
            continue
        out["lengths"][length] = {"n": n, "s_per_sample": (time.perf_counter() - t0) / n,
                                  "tok_per_sample": (ctx.full_tokenizations - before) / n, **fill_stats(fills)}
    return out


def run_reference(name, ruler, python, tok_path, chat, length, n, timeout, scratch) -> dict:
    """Run the reference generator for one RULER task and length, as scripts/data/prepare.py would."""
    cfg = yaml.safe_load((ruler / "scripts/synthetic.yaml").read_text())[name]
    base = runpy.run_path(str(ruler / "scripts/data/synthetic/constants.py"))["TASKS"][cfg["task"]]
    esc = [s.replace("{", "{{").replace("}", "}}") for s in chat]
    template = esc[0] + base["template"] + esc[1] + base.get("answer_prefix", "")
    extra = [x for k, v in cfg["args"].items() for x in (f"--{k}", str(v))]
    save, log = scratch / f"{name}-{length}", scratch / f"{name}-{length}.log.json"
    cmd = [python, str(ruler / f"scripts/data/synthetic/{cfg['task']}.py"), "--save_dir", str(save), "--save_name", name,
           "--subset", "validation", "--tokenizer_path", tok_path, "--tokenizer_type", "hf", "--max_seq_length", str(length),
           "--tokens_to_generate", str(base["tokens_to_generate"]), "--num_samples", str(n), "--random_seed", "42", *extra,
           "--template", template]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(scratch / "shim"), os.environ.get("PYTHONPATH", "")]),
           "CTXBENCH_REF_LOG": str(log), "CTXBENCH_REF_DATA": str(ruler / "scripts/data")}
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
    return {"n": n, "s_per_sample": (loop_end - calls[0][0]) / n, "search_s": loop_start - calls[0][0],
            "s_per_sample_excl_search": (loop_end - loop_start) / n, "tok_per_sample": len(full) / n,
            "search_tok": search_full, "loop_tok_per_sample": (len(full) - search_full) / n,
            "shims": rec["shims"], **fill_stats([r["length"] / length for r in rows])}


def fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}s" if x < 10 else f"{x:.1f}s"


def fmt_fill(r: dict) -> str:
    return f"{100 * r['fill_min']:.2f}/{100 * r['fill_mean']:.2f}%" if "fill_min" in r else "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ruler-dir", type=Path, help="a checkout of https://github.com/NVIDIA/RULER")
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data", help="holds pg_essays/, squad/, hotpotqa/")
    p.add_argument("--lengths", default="4096,16384,65536,131072", help="target lengths in tokens, comma-separated")
    p.add_argument("--samples", type=int, help="samples per task and length (default: 10 below 64K, 3 from 64K)")
    p.add_argument("--compare", default="niah_single_2,niah_multikey_3", help="RULER tasks to run on both sides")
    p.add_argument("--tasks", default="all", help="our tasks to time (comma-separated registry names, or all)")
    p.add_argument("--model", default="smollm2-135m", help="whose tokenizer and chat template both sides use")
    p.add_argument("--python", default=sys.executable, help="interpreter for the reference (needs transformers, wonderwords)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds allowed to one reference run")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--verify", choices=["full", "first"], default="full",
                   help="ours: tokenize every prompt in full, or only the first per task and length (then trust exact piece counts)")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    a = p.parse_args()

    ruler = a.ruler_dir
    if ruler is None or not (ruler / "scripts/data/synthetic/niah.py").exists():
        mirror = next((str(m) for m in [Path("/work/.mirror/NVIDIA+RULER/repo")] if m.exists()), "MIRROR.git")
        print(f"--ruler-dir: {ruler or 'not given'} is not a RULER checkout. Get one with\n"
              "  git clone https://github.com/NVIDIA/RULER DIR\n"
              "or from a local bare mirror:\n"
              f"  git -C {mirror} worktree add DIR HEAD   (or: git --git-dir={mirror} archive HEAD | tar -x -C DIR)\n"
              "then pass --ruler-dir DIR.", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer

    from ctxbench.harness.core import registry
    from ctxbench.harness.core.models import materialize, resolve
    from ctxbench.harness.core.prompting import PromptRenderer

    lengths = [int(x) for x in a.lengths.split(",")]
    samples = (lambda length: a.samples) if a.samples else (lambda length: 3 if length >= 65536 else 10)
    tok_path = materialize(resolve(a.model))
    tok = AutoTokenizer.from_pretrained(tok_path)
    chat = tuple(PromptRenderer(tok, "chat").render("\0").text.split("\0"))
    ensure_essays(ruler, a.data_dir)
    console = Console(width=max(Console().width, 180))
    names = registry.names("task") if a.tasks == "all" else a.tasks.split(",")
    names = list(dict.fromkeys([f"ruler/{c}" for c in a.compare.split(",") if c] + names))

    with tempfile.TemporaryDirectory(prefix="ctxbench-bench-") as tmp:
        return bench(a, ruler, Path(tmp), tok, tok_path, chat, names, lengths, samples, console)


def bench(a, ruler, scratch, tok, tok_path, chat, names, lengths, samples, console) -> int:
    (scratch / "shim").mkdir()
    (scratch / "shim" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    os.environ["CTXBENCH_CACHE"] = str(scratch / "cache")  # cold caches: the warm-up pays the one-time costs
    ours, skipped = {}, {}
    for name in names:
        console.print(f"ours: {name}")
        try:
            ours[name] = run_ours(name, tok, a.data_dir, lengths, samples, a.seed, a.verify)
        except Exception as e:  # noqa: BLE001
            skipped[name] = f"{type(e).__name__}: {e}"[:200]
    ref, shims = {}, set()
    for c in [c for c in a.compare.split(",") if c]:
        for length in lengths:
            console.print(f"reference: {c} at {length} ({samples(length)} samples)")
            ref[(c, length)] = r = run_reference(c, ruler, a.python, tok_path, chat, length, samples(length), a.timeout, scratch)
            shims.update(r.pop("shims", []))

    t = Table(title=f"RULER generation, ours vs reference ({a.model} tokenizer and chat template, same haystack)",
              caption="ref s/sample = (its one haystack-size search + N samples) / N; (excl. search) = its sample loop alone.\n"
                      "fill = (prompt + generation tokens) / length; tok = tokenizations of >= length/2 tokens.")
    for col in ("task", "length", "N", "s/sample ours", "s/sample ref", "speed-up (excl. search)", "ref: search + per sample",
                "fill min/mean ours", "fill min/mean ref", "tok/sample ours", "tok/sample ref (search + per sample)"):
        t.add_column(col, justify="left" if col == "task" else "right", no_wrap=col == "task")
    for (c, length), r in ref.items():
        o = ours.get(f"ruler/{c}", {}).get("lengths", {}).get(length, {})
        so, sr, sx = o.get("s_per_sample"), r.get("s_per_sample"), r.get("s_per_sample_excl_search")
        t.add_row(c, str(length), str(r.get("n", "-")), fmt_s(so), fmt_s(sr) if sr else "[red]error",
                  f"{sr / so:.0f}x ({sx / so:.0f}x)" if sr and so else "-",
                  f"{fmt_s(r['search_s'])} + {fmt_s(sx)}" if sr else "-", fmt_fill(o), fmt_fill(r),
                  f"{o['tok_per_sample']:.2f}" if "tok_per_sample" in o else "-",
                  f"{r['tok_per_sample']:.2f} ({r['search_tok']} + {r['loop_tok_per_sample']:.2f})" if sr else "-")
    console.print(t)

    t2 = Table(title="Ours, every task: s/sample · fill min/mean · tokenizations/sample")
    t2.add_column("task")
    t2.add_column("one-time (cold)", justify="right")
    for length in lengths:
        t2.add_column(f"{length} (N={samples(length)})", justify="right")
    for name, o in ours.items():
        cells = [f"{fmt_s(r['s_per_sample'])} · {fmt_fill(r)} · {r['tok_per_sample']:.1f}" if "error" not in r else f"[red]{r['error'][:40]}"
                 for r in (o["lengths"][length] for length in lengths)]
        t2.add_row(name, fmt_s(o["one_time_s"]), *cells)
    console.print(t2)
    for (c, length), r in ref.items():
        if "error" in r:
            console.print(f"[red]reference {c} at {length} failed[/]: {r['error']}")
    for name, err in skipped.items():
        console.print(f"[red]skipped {name}[/]: {err}")
    for s in sorted(shims):
        console.print(f"[yellow]reference shim:[/] {s}")
    if a.json:
        a.json.write_text(json.dumps({"model": a.model, "tokenizer": tok_path, "lengths": lengths, "shims": sorted(shims),
                                      "ours": ours, "skipped": skipped,
                                      "reference": [{"task": c, "length": length, **r} for (c, length), r in ref.items()]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
