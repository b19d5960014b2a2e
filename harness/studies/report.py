"""The study report (study.md, study.html, study.json): verdicts in words, per-seed scores, held-out perplexity,
training and data diagnostics. Statistics come from leaderboard.studies; the per-run leaderboard goes to report/."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from ctxbench.harness.core.io import atomic_write, jsonable
from ctxbench.harness.studies.config import UNTRAINED, StudyConfig
from ctxbench.leaderboard import studies as st
from ctxbench.leaderboard import study_power as sp
from ctxbench.leaderboard.render import Figure, Section, Table, render_html, render_markdown

TASKS = "task score"  # the family of all non-perplexity tasks, averaged over (task, length) cells
REPORT_FILES = ("study.md", "study.html", "study.json")  # written in the study's directory (StudyConfig.root())
LEADERBOARD_DIR = "report"  # beside them: the per-run leaderboard (every task, length and depth)


def study_frames(study: StudyConfig, scored) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(task scores, perplexity rows): one row per (method, seed, task, length, index) of every scoring run."""
    from ctxbench.harness.core.store import RunStore

    tasks, ppl = [], []
    for sc in scored:
        seed = sc.seed if sc.seed is not None else 0  # the untrained model: one run stands for every seed
        for r in RunStore(study.root() / "runs", sc.run_id).latest().values():
            if r.get("error"):
                continue
            key = (sc.method, seed, r["task"], int(r["length"]), int(r["index"]))
            if r.get("metric") == "perplexity":
                ppl.append((*key, r["loss"], r["nll"], r["tokens"], r["buckets"]))
            elif r.get("score") is not None:
                tasks.append((*key, float(r["score"])))
    cols = ["method", "seed", "task", "length", "index", "score"]
    return pd.DataFrame(tasks, columns=cols), pd.DataFrame(ppl, columns=[*cols, "nll", "tokens", "buckets"])


def families(study: StudyConfig, task_df: pd.DataFrame, ppl_df: pd.DataFrame) -> list[tuple[str, pd.DataFrame, bool]]:
    """(name, frame, lower is better) of every measurement the verdicts cover."""
    out = [(TASKS, task_df, False)] if len(task_df) else []
    out += [(name, part, True) for name, part in ppl_df.groupby("task", sort=True)] if len(ppl_df) else []
    return out


def pairs(study: StudyConfig) -> list[tuple[str, str]]:
    names = [m.name for m in study.methods]
    return [(m, UNTRAINED) for m in names] + [(m, study.reference) for m in names if m != study.reference]


def write_report(study: StudyConfig, trained, scored, heldout) -> dict[str, Path]:
    root = study.root()
    task_df, ppl_df = study_frames(study, scored)
    fams = families(study, task_df, ppl_df)
    jobs = [(frame, a, b) for _, frame, _ in fams for a, b in pairs(study)]
    a = study.stats.alpha
    deltas = st.compare_family(jobs, alpha=a, n_boot=study.stats.n_boot) if jobs else []
    labelled = [(name, lower, d) for (name, _, lower), chunk in zip(fams, _chunks(deltas, len(pairs(study)))) for d in chunk]
    k = len(deltas)
    sections = [_verdicts(study, labelled, k)]
    if len(task_df):
        sections.append(_scores(study, task_df, [x for x in labelled if x[0] == TASKS]))
    for name, frame, _ in fams[1 if len(task_df) else 0:]:
        sections.append(_perplexity(study, name, frame, [x for x in labelled if x[0] == name]))
    sections += [_cells(study, task_df), _power(study, labelled), _training(study, trained), _data(study, trained)]
    notes = _preamble(study, trained, heldout, k)
    title = f"Study: {study.name}"
    md_name, html_name, json_name = REPORT_FILES
    md = atomic_write(root / md_name, render_markdown(title, sections, preamble=notes))
    html = atomic_write(root / html_name, render_html(title, sections, preamble=notes))
    payload = {"study": study.model_dump(mode="json"), "alpha": a, "comparisons_in_family": k,
               "comparisons": [{"measure": n, "lower_is_better": lower, **_delta_json(d, study.stats.power)}
                               for n, lower, d in labelled],
               "seeds": st.seed_table(task_df).to_dict(orient="records") if len(task_df) else [],
               "perplexity": st.perplexities(ppl_df).to_dict(orient="records") if len(ppl_df) else [],
               "trained": [{**t.__dict__, "checkpoint": str(t.checkpoint), "run_dir": str(t.run_dir)} for t in trained],
               "scored": [s.__dict__ for s in scored],
               "heldout": {"documents": len(heldout.ids), "path": str(heldout.path)} if heldout else None}
    js = atomic_write(root / json_name, json.dumps(jsonable(payload), indent=2) + "\n")
    _leaderboard(study, scored, task_df)
    return {"markdown": md, "html": html, "json": js}


def _chunks(items: list, n: int) -> list[list]:
    return [items[i:i + n] for i in range(0, len(items), n)]


def _delta_json(d: st.Delta, power: float) -> dict[str, Any]:
    out = {k: v for k, v in d.__dict__.items() if k != "exact"}
    single = sp.single_run_power(d, power=power)
    if single is not None:  # against one fixed run: what this design can see, and the seeds that would see more
        out["power"] = dict(single.__dict__)
    if d.exact is not None:
        out["exact"] = {"p": d.exact.p_value, "method": d.exact.method, "discordant": d.exact.n_discordant}
    return out


def _fmt(v: float | None, scale: float = 1.0, digits: int = 2, sign: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v * scale:{'+' if sign else ''}.{digits}f}"


def _interval(d: st.Delta, scale: float) -> str:
    """Δ [lo, hi] p: points (scale 100, 2 decimals) or nats (scale 1, 4 decimals); the exact test's p alone if it decided."""
    digits = 2 if scale != 1 else 4
    diff = _fmt(d.diff, scale, digits, sign=True)
    if math.isnan(d.lo):
        return f"{diff} (exact p = {d.decisive_p:.3g})"
    return f"{diff} [{_fmt(d.lo, scale, digits, sign=True)}, {_fmt(d.hi, scale, digits, sign=True)}] p = {d.decisive_p:.3g}"


def _verdicts(study: StudyConfig, labelled, k: int) -> Section:
    a = study.stats.alpha
    lines = []
    for name, lower, d in labelled:
        unit, scale = ("nats/token", 1.0) if lower else ("points", 100.0)
        note = sp.power_note(d, power=study.stats.power, unit=unit, scale=scale)
        lines.append(f"{name}: {st.verdict(d, alpha=a, lower_is_better=lower, unit=unit, scale=scale)}"
                     f"{'. ' + note[0].upper() + note[1:] if note else ''}.")
    sig = [x for x in labelled if x[2].decisive_p < a and x[2].diff != 0]
    if not sig:
        head = f"No difference is significant at {a:g} after Holm's adjustment over {k} comparisons."
    else:
        head = f"{len(sig)} of {k} comparisons are significant at {a:g} after Holm's adjustment."
    between = [x for x in labelled if x[2].b != UNTRAINED]
    if between and not any(x in sig for x in between):
        head += f" No method differs significantly from the reference {study.reference}."
    return Section("Verdicts", paragraphs=(head, *lines))


def _scores(study: StudyConfig, df: pd.DataFrame, labelled) -> Section:
    seeds = st.seed_table(df)
    by_len = df.groupby(["method", "seed", "length", "task"])["score"].mean().groupby(["method", "length"]).mean()
    vs = {(d.a, d.b): d for _, _, d in labelled}
    rows = []
    for method in [UNTRAINED, *[m.name for m in study.methods]]:
        mine = seeds[seeds["method"] == method]
        if mine.empty:
            continue
        spread = "" if len(mine) < 2 else f" ± {mine['std'].iat[0] * 100:.2f}"
        per_seed = ", ".join(f"s{int(r.seed)} {r.score * 100:.1f}" for r in mine.itertuples()) if method != UNTRAINED else "one run"
        lengths = "; ".join(f"{int(n)}: {v * 100:.1f}" for (m, n), v in by_len.items() if m == method)
        rows.append((method, f"{mine['mean'].iat[0] * 100:.2f}{spread}", per_seed, lengths,
                     _interval(vs[(method, UNTRAINED)], 100) if (method, UNTRAINED) in vs else "—",
                     _interval(vs[(method, study.reference)], 100) if (method, study.reference) in vs else "—"))
    table = Table(("method", "score (mean ± seed SD)", "per seed", "by length", "Δ vs untrained [CI] p",
                   f"Δ vs {study.reference} [CI] p"), tuple(rows))
    return Section("Task scores", tables=(table,), notes=(
        "Scores ×100: the mean over (task, length) cells of each cell's mean score, averaged over seeds. Δ in points; "
        "intervals are simultaneous (Bonferroni) and p-values Holm-adjusted, see Statistics in the preamble.",))


def _perplexity(study: StudyConfig, name: str, df: pd.DataFrame, labelled) -> Section:
    from ctxbench.leaderboard.plots import position_loss_curves

    ppl = st.perplexities(df)
    vs = {(d.a, d.b): d for _, _, d in labelled}
    rows = []
    for method in [UNTRAINED, *[m.name for m in study.methods]]:
        mine = ppl[ppl["method"] == method]
        if mine.empty:
            continue
        cells = []
        for n, g in mine.groupby("length"):
            seeds = f" ± {g['ppl'].std(ddof=1):.3f} ({', '.join(f's{int(r.seed)} {r.ppl:.3f}' for r in g.itertuples())})" \
                if len(g) > 1 else ""
            cells.append(f"{int(n)}: {g['ppl'].mean():.3f}{seeds}")
        rows.append((method, "; ".join(cells), _interval(vs[(method, UNTRAINED)], 1) if (method, UNTRAINED) in vs else "—",
                     _interval(vs[(method, study.reference)], 1) if (method, study.reference) in vs else "—"))
    table = Table(("method", "perplexity by length (mean ± seed SD (per seed))", "Δ loss vs untrained [CI] p",
                   f"Δ loss vs {study.reference} [CI] p"), tuple(rows))
    curve = st.position_losses(df)
    longest = int(df["length"].max())
    stride = f" Sliding windows every {study.perplexity.stride or 'length/2'} tokens." if name.endswith("sliding") else ""
    return Section(f"Held-out perplexity ({name})", tables=(table,), figures=(
        Figure(position_loss_curves(curve, length=longest), f"loss by position at {longest}"),), notes=(
        f"{df['index'].nunique()} held-out documents at every length; perplexity = exp(summed NLL / scored tokens). Δ is "
        f"the difference in mean per-token loss (nats; negative = lower loss), documents paired across methods.{stride}",))


def _cells(study: StudyConfig, df: pd.DataFrame) -> Section:
    rows = []
    for a in [m.name for m in study.methods]:
        for b in [x for x in (UNTRAINED, study.reference) if x != a]:
            if df.empty:
                continue
            for r in st.cell_deltas(df, a, b, n_boot=500).itertuples():
                ci = "—" if math.isnan(r.lo) else f"[{r.lo * 100:+.1f}, {r.hi * 100:+.1f}]"
                rows.append((f"{a} − {b}", r.task, str(r.length), str(r.n), str(r.discordant), f"{r.diff * 100:+.1f}", ci,
                             f"{r.p:.3g}", r.test))
    table = Table(("comparison", "task", "length", "n", "differ", "Δ", "95% CI", "p (unadjusted)", "test"), tuple(rows))
    return Section("Per task and length", tables=(table,), collapsed=True, notes=(
        f"Cells with fewer than {st.MIN_BOOT_N} samples, or fewer than {st.MIN_DISCORDANT} that differ, get the exact "
        "paired test (sign test / sign-flip permutation) and no interval.",))


def _power(study: StudyConfig, labelled) -> Section:
    pw = study.stats.power
    rows = [(name, f"{d.a} − {d.b}", _fmt(d.se, 1 if lower else 100, 3), f"{d.df:.1f}" if math.isfinite(d.df) else "∞",
             _fmt(d.var_seed / (d.var_seed + d.var_sample) if d.var_seed + d.var_sample else math.nan, 100, 0) + "%",
             _fmt(st.detectable_effect(d, power=pw), 1 if lower else 100, 3))
            for name, lower, d in labelled if d.method in (st.METHOD, st.SINGLE_SEED_METHOD)]
    table = Table(("measure", "comparison", "SE", "df", "seed share of variance", f"detectable at {pw:.0%} power"),
                  tuple(rows))
    return Section("Power", tables=(table,), notes=(
        "The smallest difference each comparison would detect (points for task scores, nats for loss), from its "
        "standard error and Satterthwaite df at the adjusted level. More seeds shrink the seed share; more samples the rest.",))


def _training(study: StudyConfig, trained) -> Section:
    from ctxbench.leaderboard.plots import training_curves
    from ctxbench.trainers.base import TrainRun

    rows = tuple((t.method, str(t.seed), str(t.steps), f"{t.tokens:,}", _fmt(t.train_loss, digits=4),
                  _fmt(t.eval_loss, digits=4), t.run_id, t.data_hash) for t in trained)
    points = [(t.method, t.seed, r["step"], r["split"], r["loss"]) for t in trained
              for r in TrainRun(t.run_dir.parent, t.run_id).losses()]
    figs = (Figure(training_curves(pd.DataFrame(points, columns=["method", "seed", "step", "split", "loss"])),
                   "training and validation loss"),) if points else ()
    table = Table(("method", "seed", "steps", "tokens (non-padding)", "final train loss", "final val loss", "run id",
                   "data hash"), rows)
    return Section("Training", tables=(table,), figures=figs, notes=(
        "Validation losses are on each method's own held-out packed data, so they compare methods only loosely; the "
        "held-out perplexity above is the shared measurement.",))


def _data(study: StudyConfig, trained) -> Section:
    firsts = {}
    for t in trained:
        firsts.setdefault(t.method, t)
    rows = []
    for method, t in firsts.items():
        for part, rep in (t.diagnostics or {"(none)": {}}).items():
            sim, zipf = rep.get("doc_similarity") or {}, rep.get("zipf") or {}
            rows.append((method, part, str(rep.get("sequences", "—")), _fmt((rep.get("docs_per_sequence") or {}).get("mean")),
                         _fmt(sim.get("mean"), digits=3), _fmt(zipf.get("mean"), digits=3),
                         ", ".join(f"{k} {v:.0%}" for k, v in list((rep.get("domains") or {}).items())[:3]) or "—",
                         _fmt(rep.get("duplicate_rate"), digits=3)))
    table = Table(("method", "part", "sequences", "docs/sequence", "doc similarity", "Zipf coefficient", "domains",
                   "duplicate rate"), tuple(rows))
    return Section("Training data", tables=(table,), notes=(
        f"`ctxbench data inspect` diagnostics of seed {study.seeds[0]}'s data: documents per sequence, mean pairwise "
        "TF-IDF similarity within a sequence (Quest Fig. 7), Zipf coefficient (SPLICE Table 9: lower = burstier), "
        "domains, and the share of repeated document placements (a continuation across sequences is not a repeat).",))


def _preamble(study: StudyConfig, trained, heldout, k: int) -> tuple[str, ...]:
    from ctxbench.harness.core.models import resolve
    from ctxbench.trainers.base import ScratchModel

    base = "a from-scratch model" if isinstance(study.base_model, ScratchModel) else study.base_model
    lines = [study.description or f"Study {study.name}.",
             f"Design: {len(study.methods)} methods × {len(study.seeds)} seeds (each (method, seed) its own training run), "
             f"plus the untrained starting checkpoint ({base}); reference method {study.reference}. Budget "
             f"{study.budget_tokens:,} tokens per method at {study.seq_len} tokens per sequence; "
             f"{'each seed makes its own data' if study.vary_packing else 'one data set per method'}."]
    if not isinstance(study.base_model, ScratchModel):
        gguf = resolve(study.base_model).gguf_file
        if gguf:
            lines.append(f"The base model is dequantized from the GGUF file {gguf}: its weights keep that quantization's "
                         "error, so absolute scores sit below the unquantized model's; every row starts from the same weights.")
    if heldout is not None:
        lines.append(f"Held-out perplexity: {len(heldout.ids)} corpus documents of at least {heldout.min_tokens} tokens, "
                     "excluded from every method's training data (checked by document id before training).")
    a = study.stats.alpha
    lines.append(f"Statistics: each Δ is A − B averaged over (task, length) cells; its interval is the estimate ± q × SE "
                 "with SE from two variance levels (each method's seeds, the samples of each cell) and q from a parametric "
                 f"bootstrap of the t statistic under those fitted levels. With {k} comparisons the intervals are simultaneous at "
                 f"{1 - a / max(k, 1):.2%} (Bonferroni) and verdicts use Holm-adjusted p-values at {a:g} (Holm is never "
                 "less powerful, so a verdict can be significant while its interval touches 0); comparisons where fewer "
                 f"than {st.MIN_DISCORDANT} samples differ are decided by the exact paired test instead.")
    return tuple(lines)


def _leaderboard(study: StudyConfig, scored, task_df: pd.DataFrame) -> None:
    """The per-run leaderboard (every task, length and depth) under report/."""
    if task_df.empty:
        return
    from ctxbench.leaderboard import build_report
    from ctxbench.leaderboard.store_frame import examples, runs_frame

    df = runs_frame(study.root() / "runs", [s.run_id for s in scored])
    build_report(df, out_dir=study.root() / LEADERBOARD_DIR, title=f"Study {study.name}: every run", examples=examples(df))
