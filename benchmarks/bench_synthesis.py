"""Benchmark data synthesis: tokens/s and peak memory of standard packing, SPLICE-BM25 and Quest.

    python benchmarks/bench_synthesis.py [--work DIR] [--budget 10000000] [--seq-len 8192]
        [--methods standard,splice-bm25,quest] [--json OUT]

Corpus: this Python's standard-library tree (every .py file outside site-packages), each file split at
blank lines into chunks of at least --min-lines non-blank lines: real code, no repetition, ~107K
documents of ~85 tokens for --min-lines 2 on CPython 3.11 (short documents are the hard case for
SPLICE: one retrieval per ~85 tokens). Domain = top-level package, path = file#chunk.

Phases, each in a fresh subprocess so its peak RSS (ru_maxrss) is its own:
  tokenize: one-time ingestion into the token cache (reported separately; later runs reuse it);
  per method, cold: prepare (one-time, cached: the BM25 index; Quest's queries + RAKE keywords) + pack;
  per method, warm: the same synthesis into a fresh out_dir with those caches present.
Timed: the synthesize() call (after interpreter start-up and tokenizer load). "pack" is the packing
loop alone (sequences + shard writes); "synth" is the whole call (open cache, prepare, pack).
Throughput = budget tokens / seconds. Wall and process CPU time are both reported (the machine may be
shared); peak RSS includes the interpreter, numpy, transformers and the tokenizer ("baseline": the
child's peak RSS just before synthesize(); "over baseline" = what synthesis itself added at its peak).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METHODS = {
    "standard": ("standard", {}),
    "within_domain": ("within_domain", {}),
    "splice-bm25": ("splice", {"retriever": "bm25", "k": 1, "order": "identity"}),
    "splice-repo": ("splice", {"retriever": "repo", "k": 1}),
    "quest": ("quest", {"split_ratio": 0.2, "oversample": "balance"}),
    "knn-hash": ("knn", {"embedder": "hash"}),
    "iclm-hash": ("iclm", {"embedder": "hash"}),
}


def make_corpus(path: Path, min_lines: int) -> dict:
    """Chunk every stdlib .py file at blank lines into documents of >= min_lines non-blank lines."""
    src = Path(sysconfig.get_paths()["stdlib"])
    n = chars = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for d, dirs, files in os.walk(src):
            dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "__pycache__"))
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                rel = (Path(d) / f).relative_to(src).as_posix()
                dom = rel.split("/")[0] if "/" in rel else "(root)"
                lines = (Path(d) / f).read_text(encoding="utf-8", errors="replace").split("\n")
                chunks, cur = [], []
                for line in lines:
                    cur.append(line)
                    if not line.strip() and sum(1 for x in cur if x.strip()) >= min_lines:
                        chunks.append(cur)
                        cur = []
                chunks.append(cur)
                part = 0
                for chunk in chunks:
                    text = "\n".join(chunk).strip("\n")
                    if text.strip():
                        out.write(json.dumps({"text": text, "path": f"{rel}#{part}", "domain": dom}) + "\n")
                        n, chars, part = n + 1, chars + len(text), part + 1
    tmp.replace(path)
    return {"docs": n, "chars": chars}


def child(args) -> None:
    """One phase in this process; prints a JSON line with its timings and peak RSS."""
    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.trainers.data.corpus import CorpusConfig
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.token_cache import load_corpus

    tok = load_tokenizer("smollm2-135m")
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # interpreter + libraries + tokenizer
    corpus = CorpusConfig(path=str(args.corpus), path_field="path", domain_field="domain")
    w0, c0 = time.perf_counter(), time.process_time()
    if args.child == "tokenize":
        c = load_corpus(corpus, tok, cache_root=args.cache)
        res = {"docs": len(c), "tokens": c.num_tokens}
    else:
        method, margs = METHODS[args.child]
        cfg = SynthesisConfig(corpus=corpus, method=method, method_args=margs, seq_len=args.seq_len,
                              budget_tokens=args.budget, tokenizer="smollm2-135m", out_dir=str(args.out),
                              cache_dir=str(args.cache), seed=0)
        m = synthesize(cfg, tokenizer=tok)
        t = m.stats["timing"]
        res = {"tokens": m.tokens, "load_corpus_s": t["load_corpus_seconds"], "prepare_s": t["prepare_seconds"],
               "pack_s": t["pack_seconds"], "summary": m.stats["methods"]}
    res.update(wall_s=round(time.perf_counter() - w0, 3), cpu_s=round(time.process_time() - c0, 3),
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               baseline_rss_mb=round(base_rss, 1))
    print("RESULT " + json.dumps(res))


def run_child(args, phase: str, out: Path | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", phase, "--corpus", str(args.corpus), "--cache", str(args.cache),
           "--budget", str(args.budget), "--seq-len", str(args.seq_len)] + (["--out", str(out)] if out else [])
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if p.returncode or line is None:
        raise SystemExit(f"{phase} failed:\n{p.stderr[-3000:]}")
    return json.loads(line[7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ctxbench-bench-synthesis"))
    ap.add_argument("--budget", type=int, default=10_000_000, help="tokens to synthesize per method")
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--min-lines", type=int, default=2)
    ap.add_argument("--methods", default="standard,splice-bm25,quest", help=f"any of {','.join(METHODS)}")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--corpus", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    from rich.console import Console
    from rich.table import Table

    con = Console(width=170)
    args.work.mkdir(parents=True, exist_ok=True)
    args.corpus, args.cache = args.work / f"stdlib-chunks-{args.min_lines}.jsonl", args.work / "cache"
    shutil.rmtree(args.cache, ignore_errors=True)  # cold start: tokenization and indexes are measured
    info = make_corpus(args.corpus, args.min_lines)
    tok = run_child(args, "tokenize")
    report = {"corpus": {**info, "tokens": tok["tokens"], "source": "stdlib .py files chunked at blank lines"},
              "tokenize": tok, "budget_tokens": args.budget, "seq_len": args.seq_len, "methods": {}}
    con.print(f"corpus: {info['docs']:,} docs, {tok['tokens']:,} tokens; tokenize {tok['wall_s']}s wall "
              f"({tok['tokens'] / tok['wall_s']:,.0f} tok/s), peak {tok['peak_rss_mb']} MB")
    for name in [m for m in args.methods.split(",") if m]:
        runs = {}
        for phase in ("cold", "warm"):
            out = args.work / f"out-{name}-{phase}"
            shutil.rmtree(out, ignore_errors=True)
            runs[phase] = run_child(args, name, out)
            shutil.rmtree(out, ignore_errors=True)
        report["methods"][name] = runs
        con.print(f"{name}: done")
    t = Table(title=f"synthesis throughput: {args.budget:,} tokens, seq_len {args.seq_len}, "
                    f"{report['corpus']['docs']:,} docs")
    for col in ("method", "prepare s (cold, one-time)", "pack s", "pack tok/s", "synth tok/s warm (wall)",
                "synth tok/s warm (cpu)", "synth tok/s cold (wall)", "peak RSS MB", "over baseline MB"):
        t.add_column(col, justify="right")
    for name, r in report["methods"].items():
        cold, warm = r["cold"], r["warm"]
        n = warm["tokens"]
        t.add_row(name, f"{cold['prepare_s']:.2f}", f"{warm['pack_s']:.2f}", f"{n / max(warm['pack_s'], 1e-9):,.0f}",
                  f"{n / warm['wall_s']:,.0f}", f"{n / warm['cpu_s']:,.0f}", f"{n / cold['wall_s']:,.0f}",
                  f"{max(cold['peak_rss_mb'], warm['peak_rss_mb']):.0f}",
                  f"{max(cold['peak_rss_mb'] - cold['baseline_rss_mb'], warm['peak_rss_mb'] - warm['baseline_rss_mb']):.0f}")
    con.print(t)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
        con.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
