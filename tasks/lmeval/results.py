"""lm-evaluation-harness results in the run store.

* ``sample_rows``: lm-eval's logged samples as run-store rows (one per document, typed as harness.core.rows.Row), so
  short-context results sit beside the long-context ones.
* ``write_aggregates``: lm-eval's own aggregate metrics, with its stderr, to ``lmeval_results.json`` in a run dir;
  ``read_aggregates`` and ``completed`` read them back.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_write, jsonable
from ctxbench.harness.core.metrics import is_empty
from ctxbench.harness.core.provenance import version
from ctxbench.harness.core.rows import Row

AGGREGATES_FILE = "lmeval_results.json"
SHORT_LENGTH = 0  # the length axis of short-context rows
TOP_CATEGORY = "lm-eval"  # category of a task that is not inside a group
# MMLU's four categories, as the papers name them (lm-eval's group aliases are stem, humanities, ...).
MMLU_CATEGORIES = {
    "mmlu_stem": "STEM",
    "mmlu_humanities": "humanities",
    "mmlu_social_sciences": "social sciences",
    "mmlu_other": "other",
}



def parents(results: dict[str, Any]) -> dict[str, str]:
    """Each task or group -> the group directly containing it."""
    out = {}
    for group, children in (results.get("group_subtasks") or {}).items():
        for c in children:
            out.setdefault(c, group)
    return out


def category_of(task: str, results: dict[str, Any]) -> str:
    """MMLU subjects: their MMLU category; a task inside a group: that group's alias; otherwise 'lm-eval'."""
    up = parents(results)
    g = up.get(task)
    seen = set()
    while g is not None and g not in seen:  # the nearest MMLU category above the task, if any
        if g in MMLU_CATEGORIES:
            return MMLU_CATEGORIES[g]
        seen.add(g)
        g = up.get(g)
    g = up.get(task)
    if g is None:
        return TOP_CATEGORY
    alias = ((results.get("groups") or {}).get(g) or {}).get("alias") or g
    return str(alias).strip().lstrip("- ").strip() or g


def _unit(value: Any) -> float | None:
    """A per-sample metric value as a score in [0, 1], or None (tuples of perplexity tasks, out-of-range values)."""
    if value is None or isinstance(value, (str, bytes, list, tuple, dict)):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and 0 <= v <= 1 else None


def sample_metric(sample: dict[str, Any], config: dict[str, Any], prefer: str | None = None) -> str | None:
    """The per-sample score: `prefer` if given, else acc, else the task's first metric with a 0..1 value."""
    names = list(sample.get("metrics") or [])
    if prefer:
        if prefer not in names:
            raise ConfigError(f"metric: lm-eval task {config.get('task')!r} has per-sample metrics {names}, not {prefer!r}")
        return prefer
    if "acc" in names:
        return "acc"
    listed = [m.get("metric") for m in config.get("metric_list") or [] if isinstance(m, dict)]
    for name in [n for n in listed if n in names] + names:
        if _unit(sample.get(name)) is not None:
            return name
    return names[0] if names else None


def _text(x: Any) -> str:
    return x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str)


def _prediction(sample: dict[str, Any], output_type: str) -> tuple[str, list[str]]:
    """(what the model answered, the reference answers) as text, for the board's examples."""
    args, resps, target = sample.get("arguments") or [], sample.get("filtered_resps") or [], sample.get("target")
    if output_type == "multiple_choice" and args:
        conts = [a[1] for a in args]
        ctxs = [a[0] for a in args]
        # winogrande-style tasks put the choices in the contexts, with one shared continuation
        choices = conts if len(set(conts)) > 1 or len(conts) == 1 else [c[-60:] for c in ctxs]
        lls = [r[0] if isinstance(r, (list, tuple)) else r for r in resps]
        pred = choices[max(range(len(lls)), key=lambda i: lls[i])].strip() if lls else ""
        golds = target if isinstance(target, list) else [target]
        answers = [choices[g].strip() if isinstance(g, int) and 0 <= g < len(choices) else _text(g) for g in golds]
        return pred, answers
    if output_type == "generate_until":
        pred = resps[0] if resps else ""
        while isinstance(pred, (list, tuple)) and pred:
            pred = pred[0]
        return _text(pred), [_text(t) for t in (target if isinstance(target, list) else [target])]
    if output_type == "loglikelihood" and args:
        greedy = bool(resps[0][1]) if resps and isinstance(resps[0], (list, tuple)) else False
        return (args[0][1].strip() if greedy else ""), [args[0][1].strip()]
    return "", []


def sample_rows(results: dict[str, Any], *, backend: Any = None, metric: str | None = None,
                filter_name: str | None = None) -> list[dict[str, Any]]:
    """One store row per logged document of every lm-eval task: task ``lmeval/<task>``, length 0, score in 0..1.

    A task with several filters (e.g. strict/flexible answer extraction) contributes the rows of its first
    filter, or of ``filter_name``. Rows whose metric has no 0..1 per-sample value (perplexities) get score None.
    """
    tok = getattr(backend, "tokenizer", None)
    n_total = sum(len(v) for v in (results.get("samples") or {}).values()) or 1
    per_sample_s = float(results.get("seconds", 0.0)) / n_total
    rows = []
    for task, samples in sorted((results.get("samples") or {}).items()):
        config = (results.get("configs") or {}).get(task, {})
        output_type = config.get("output_type", "")
        filters = list(dict.fromkeys(s.get("filter", "none") for s in samples))
        if filter_name is not None and filter_name not in filters:
            raise ConfigError(f"filter: lm-eval task {task!r} has filters {filters}, not {filter_name!r}")
        chosen = filter_name or (filters[0] if filters else "none")
        category = category_of(task, results)
        for s in sorted((s for s in samples if s.get("filter", "none") == chosen), key=lambda s: s["doc_id"]):
            name = sample_metric(s, config, metric)
            score = _unit(s.get(name)) if name else None
            prompt = s["arguments"][0][0] if s.get("arguments") else ""
            pred, answers = _prediction(s, output_type)
            generative = output_type == "generate_until"
            gen_tokens = len(tok(pred, add_special_tokens=False)["input_ids"]) if tok is not None and pred and generative else 0
            budget = int((config.get("generation_kwargs") or {}).get("max_gen_toks", 0) or 0) if generative else 0
            rows.append(Row(
                id=f"lmeval/{task}@{SHORT_LENGTH}#{s['doc_id']}", task=f"lmeval/{task}", category=category,
                length=SHORT_LENGTH, index=int(s["doc_id"]),
                prompt_hash=hashlib.sha256(prompt.encode()).hexdigest()[:16],
                prompt_tokens=len(tok(prompt, add_special_tokens=False)["input_ids"]) if tok is not None else 0,
                max_new_tokens=budget, prediction=pred, generated_tokens=gen_tokens, seconds=round(per_sample_s, 4),
                metric=name or "", score=score, empty=is_empty(pred), answers=tuple(answers),
                meta={"lmeval_task": task, "filter": chosen, "output_type": output_type,
                      "metrics": {m: jsonable(s.get(m)) for m in s.get("metrics") or []},
                      "n_shot": (results.get("n-shot") or {}).get(task)},
                extra={"timing": "batch-share"},
            ))
    return [r.to_json() for r in rows]  # as stored (RunStore.append reads each back as a Row)


# ---- aggregates -----------------------------------------------------------------------------------


def _metric_table(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """lm-eval's 'acc,none' / 'acc_stderr,none' keys -> {'acc,none': {'value': .., 'stderr': ..}}."""
    out = {}
    for key, value in entry.items():
        if "," not in key or "_stderr," in key:
            continue
        metric, filt = key.split(",", 1)
        stderr = entry.get(f"{metric}_stderr,{filt}")
        out[key] = {"value": jsonable(value), "stderr": jsonable(stderr) if not isinstance(stderr, str) else None}
    return out


def aggregates(results: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """A compact, JSON-safe summary of an lm-eval run: every task's and group's metrics with lm-eval's stderr,
    MMLU's categories (lm-eval's group scores, weighted by subject size), and what reproduces it."""
    groups = results.get("groups") or {}
    cats = {MMLU_CATEGORIES[g]: {"group": g, **_metric_table(groups[g])} for g in MMLU_CATEGORIES if g in groups}
    cfg = results.get("config") or {}
    return jsonable({
        "name": name or results.get("ctxbench_task") or "+".join(results.get("requested") or sorted(results.get("results", {}))),
        "requested": results.get("requested"),
        "tasks": {t: {"alias": e.get("alias", t), "metrics": _metric_table(e)}
                  for t, e in (results.get("results") or {}).items() if t not in groups},
        "groups": {g: {"alias": e.get("alias", g), "metrics": _metric_table(e)} for g, e in groups.items()},
        "mmlu_categories": cats,
        "group_subtasks": results.get("group_subtasks"),
        "n_shot": results.get("n-shot"),
        "n_samples": results.get("n-samples"),
        "versions": results.get("versions"),
        "higher_is_better": results.get("higher_is_better"),
        "configs": results.get("configs"),
        "config": {k: cfg.get(k) for k in ("limit", "bootstrap_iters", "random_seed", "numpy_seed", "torch_seed", "fewshot_seed", "gen_kwargs")},
        "lm_eval_version": version("lm_eval"),
        "seconds": results.get("seconds"),
        "raw": {"results": results.get("results"), "groups": groups},  # lm-eval's own dicts, unchanged
    })


def write_aggregates(run_dir: str | Path, results: dict[str, Any], name: str | None = None) -> Path:
    """Merge one lm-eval run's aggregates into ``<run_dir>/lmeval_results.json`` under its name (e.g. lmeval/mmlu).

    ``results`` is lm-eval's results dict (as ``evaluate`` / the task's ``results`` attribute give it) or the
    output of ``aggregates``. Written atomically; other tasks' entries in the file are kept.
    """
    entry = results if "tasks" in results and "raw" in results else aggregates(results, name)
    if name:
        entry = {**entry, "name": name}
    path = Path(run_dir) / AGGREGATES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = read_aggregates(run_dir)
    doc.setdefault("schema", 1)
    doc.setdefault("tasks", {})[entry["name"]] = entry
    atomic_write(path, json.dumps(doc, indent=1, sort_keys=True, allow_nan=False))
    return path


def read_aggregates(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / AGGREGATES_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def completed(run_dir: str | Path) -> set[str]:
    """Names of the lm-eval tasks whose aggregates are already in the run (a rerun can skip them)."""
    return set(read_aggregates(run_dir).get("tasks", {}))
