"""The CPU acceptance study of LOGO (issue 14, §9): data -> train (LOGO and an SFT baseline) -> score -> board.

    python benchmarks/logo_study.py [--work runs/logo-study] [--data-dir ../shared/data] [--max-samples 48]
        [--samples 3] [--niah-lengths 2048,4096,8192] [--qa-lengths 2048] [--ppl-lengths 2048,4096,8192]
        [--ppl-documents 2] [--ppl-task ppl/sliding|ppl/full] [--max-steps N]

Every step is a `ctxbench` command (resumable: rerunning skips what is finished):
  1. ctxbench data logo   (configs/data/logo-tiny.yaml: SmolLM2-135M answers its own HotpotQA prompts)
  2. ctxbench train logo  twice: LOGO (configs/trainers/logo-tiny.yaml) and SFT on the chosen replies with the same
     data, LoRA and schedule (objective: sft, λ only: configs/trainers/logo-tiny-sft.yaml)
  3. ctxbench score       base, sft and logo on niah/single (2K-8K) and ruler/qa_1 (SQuAD: disjoint from the
     HotpotQA training data), the same samples for every model; and ppl/sliding (Fig. 4's perplexity against
     length, sliding windows as LOGO evaluates PG-19) on the longest Paul Graham essays: PG-19 is not on disk
  4. ctxbench board build with paired comparisons logo:base, sft:base, logo:sft (paired bootstrap, 95% CIs)
and it writes <work>/summary.json (timings, data and training manifests, paired Δ with CIs, whether each Δ is
significant), <work>/board/reward_margin.png (the reward margin β·r(y_w) − β·mean r(y_l) against steps) and
<work>/board/perplexity.png (perplexity against length per model). Perplexity rows are losses, not 0..1 scores, so
the board's paired Δ leaves them out; they are read from each run's store here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("base", "sft", "logo")


def sh(args: list[str], log: Path) -> float:
    """Run a ctxbench command, appending its output to the log; return its wall seconds."""
    start = time.perf_counter()
    with open(log, "a") as f:
        f.write(f"\n$ ctxbench {' '.join(args)}\n")
        f.flush()
        res = subprocess.run([sys.executable, "-m", "ctxbench.harness.cli", *args], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    if res.returncode:
        raise SystemExit(f"ctxbench {' '.join(args)} failed ({res.returncode}); see {log}")
    return round(time.perf_counter() - start, 1)


def trainer_config(name: str, work: Path, max_steps: int | None = None) -> Path:
    raw = yaml.safe_load((ROOT / "configs" / "trainers" / f"{name}.yaml").read_text())
    if max_steps:  # a smaller run: evaluate and save at its end
        raw.update(max_steps=max_steps, eval_steps=max_steps, save_steps=max_steps)
    raw["data"]["path"] = str(work / "data")
    raw["store"] = str(work / "train")
    raw["output_dir"] = str(work / "models" / name)
    out = work / f"{name}.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def margin_plot(rows: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, metrics in rows.items():
        for split, style in (("train", "-o"), ("eval", "--s")):
            pts = [(r["step"], r["rewards/margin"]) for r in metrics if r["split"] == split]
            if pts:
                ax.plot(*zip(*pts), style, label=f"{label} ({split})", markersize=4)
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_xlabel("step")
    ax.set_ylabel("reward margin  β·r(y_w) − β·mean r(y_l)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def perplexity_curves(scores: Path) -> dict[str, list[dict]]:
    """Per model label: perplexity at each length of the ppl task (exp of summed NLL over scored tokens)."""
    from ctxbench.harness.core.store import list_runs
    from ctxbench.harness.summary import perplexity_frame

    out: dict[str, list[dict]] = {}
    for store in list_runs(scores):
        label = str(store.read_record().get("label"))
        frame = perplexity_frame(store)
        if not frame.empty:
            out.setdefault(label, []).extend({"task": r.task, "length": int(r.length), "tokens": int(r.tokens),
                                              "ppl": round(float(r.ppl), 4), "documents": f"{r.done}/{r.planned}"}
                                             for r in frame.itertuples() if r.done)
    return out


def perplexity_plot(curves: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, rows in sorted(curves.items()):
        pts = sorted((r["length"], r["ppl"]) for r in rows)
        ax.plot(*zip(*pts), "-o", label=label, markersize=4)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("window (tokens)")
    ax.set_ylabel("perplexity (sliding windows)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def paired_summary(c: dict) -> dict:
    """The board's paired comparison of two models: Δ in points, its 95% interval (a t interval over (task, length)
    cells, given only where at least 10 pairs differ; else the note says why), the exact test and its verdict."""
    return {"delta": round(c["overall"], 2), "ci95": [round(x, 2) for x in c["ci95"]] if c.get("ci95") else None,
            "ci_note": c.get("ci_note", ""), "p_value": c["p_value"], "method": c["method"], "n_pairs": c["n_pairs"],
            "n_discordant": c["n_discordant"], "significant": c["p_value"] < c["alpha"], "verdict": c["verdict"],
            "cells": c["cells"]}


def verdict(name: str, c: dict) -> str:
    ci = f", 95% CI [{c['ci95'][0]:+.1f}, {c['ci95'][1]:+.1f}]" if c.get("ci95") else f" ({c['ci_note']})"
    word = "significant" if c["significant"] else "NOT significant"
    return f"{name}: Δ = {c['delta']:+.1f} points{ci}, exact p = {c['p_value']:.3g}, {c['n_pairs']} pairs: {word}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "logo-study")
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("CTXBENCH_DATA_DIR", ROOT.parent / "shared" / "data")))
    ap.add_argument("--max-samples", type=int, default=48, help="HotpotQA questions to build preference data from")
    ap.add_argument("--samples", type=int, default=3, help="scored samples per task and length")
    ap.add_argument("--niah-lengths", default="2048,4096,8192")
    ap.add_argument("--qa-lengths", default="2048")
    ap.add_argument("--ppl-lengths", default="2048,4096,8192", help="perplexity windows ('' = no perplexity curve)")
    ap.add_argument("--ppl-documents", type=int, default=2, help="essays of at least the longest window (2 qualify at 8K)")
    ap.add_argument("--ppl-task", default="ppl/sliding", choices=["ppl/sliding", "ppl/full"],
                    help="sliding windows (as LOGO evaluates PG-19) or one window per length (cheaper)")
    ap.add_argument("--max-steps", type=int, default=None, help="train fewer steps than the configs (8)")
    args = ap.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    log = work / "log.txt"
    seconds: dict[str, float] = {}

    seconds["data"] = sh(["data", "logo", "--config", "configs/data/logo-tiny.yaml", "--data-dir", str(args.data_dir),
                          "--out", str(work / "data"), "--max-samples", str(args.max_samples)], log)
    for name, label in (("logo-tiny", "logo"), ("logo-tiny-sft", "sft")):
        seconds[f"train_{label}"] = sh(["train", "logo", "--config", str(trainer_config(name, work, args.max_steps))], log)

    niah = [int(x) for x in args.niah_lengths.split(",")]
    qa = [int(x) for x in args.qa_lengths.split(",")]
    ppl = [int(x) for x in args.ppl_lengths.split(",") if x]
    suite = {"name": "logo-cpu", "description": "LOGO CPU study: niah/single, ruler/qa_1 (SQuAD), essay perplexity",
             "seed": 42, "lengths": sorted(set(niah + qa + ppl)), "samples": args.samples,
             "tasks": [{"task": "niah/single", "args": {"depths": args.samples}, "lengths": niah},
                       {"task": "ruler/qa_1", "lengths": qa}]}
    if ppl:
        suite["tasks"].append({"task": args.ppl_task, "lengths": ppl, "args": {
            "source": "essays", "min_tokens": max(ppl), "documents": args.ppl_documents}})
    (work / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    paths = {"base": "smollm2-135m", "sft": str(work / "models" / "logo-tiny-sft"), "logo": str(work / "models" / "logo-tiny")}
    for label in MODELS:
        seconds[f"score_{label}"] = sh(["score", "--model", paths[label], "--label", label, "--suite", str(work / "suite.yaml"),
                                        "--store", str(work / "scores"), "--data-dir", str(args.data_dir), "--dtype", "float32",
                                        "--threads", "1", "--batch-size", "1"], log)
    pairs = [("logo", "base"), ("sft", "base"), ("logo", "sft")]
    seconds["board"] = sh(["board", "build", "--store", str(work / "scores"), "--out", str(work / "board"),
                           *[x for a, b in pairs for x in ("--compare", f"{a}:{b}")]], log)

    from ctxbench.leaderboard.store_frame import runs_frame

    df = runs_frame(work / "scores")
    means = df.groupby(["model", "task", "length"])["score"].mean().unstack("model").round(4)
    board = json.loads((work / "board" / "results.json").read_text())
    comparisons = {f"{c['model_a']}-{c['model_b']}": paired_summary(c) for c in board["comparisons"]}
    metrics = {}
    for label, name in (("logo", "logo-tiny"), ("sft", "logo-tiny-sft")):
        manifest = json.loads((work / "models" / name / "ctxbench_manifest.json").read_text())
        metrics[label] = [json.loads(x) for x in (Path(manifest["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
    margin_plot(metrics, work / "board" / "reward_margin.png")
    curves = perplexity_curves(work / "scores")
    if curves:
        perplexity_plot(curves, work / "board" / "perplexity.png")
    data = json.loads((work / "data" / "manifest.json").read_text())
    summary = {
        "seconds": seconds,
        "data": {k: data[k] for k in ("input_samples", "samples", "drops", "modes", "real_tokens", "max_real_length",
                                      "target_window", "calls")},
        "training": {label: {k: json.loads((work / "models" / name / "ctxbench_manifest.json").read_text())[k]
                             for k in ("steps", "tokens", "train_loss", "eval_loss", "seconds")}
                     for label, name in (("logo", "logo-tiny"), ("sft", "logo-tiny-sft"))},
        "reward_margin": {label: [(r["step"], r["split"], round(r["rewards/margin"], 4), round(r["rewards/accuracy"], 3))
                                  for r in rows] for label, rows in metrics.items()},
        "scores": {f"{t}@{n}": row for (t, n), row in means.to_dict(orient="index").items()},
        "paired": comparisons,
        "verdicts": [verdict(name, c) for name, c in comparisons.items()],
        "perplexity": curves,
    }
    (work / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({k: summary[k] for k in ("seconds", "data", "training", "perplexity")}, indent=1, default=str))
    for line in summary["verdicts"]:
        print(line)
    print(f"board: {work / 'board'}; reward margins: {work / 'board' / 'reward_margin.png'}; perplexity: "
          f"{work / 'board' / 'perplexity.png'}")


if __name__ == "__main__":
    main()
