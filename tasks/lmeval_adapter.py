"""lm-evaluation-harness over ctxbench backends.

* ``CtxbenchLM``: lm-eval's ``LM`` interface (loglikelihood, loglikelihood_rolling, generate_until) over any
  ctxbench backend. Log-likelihoods need a backend with ``loglikelihood``/``loglikelihood_rolling`` (hf has them);
  generation works with every backend.
* ``evaluate``: run lm-eval tasks (``lm_eval.simple_evaluate``, samples logged) through a backend.
* ``sample_rows``: lm-eval's logged samples as run-store rows (one per document, the format of
  ``harness.runner._row``), so short-context results sit beside the long-context ones.
* ``write_aggregates``: lm-eval's own aggregate metrics, with its stderr, to ``lmeval_results.json`` in a run dir.

Importing this module is cheap: lm_eval is imported only when used (``CtxbenchLM`` is built on first access).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
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


def __getattr__(name: str):
    if name == "CtxbenchLM":
        return _lm_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _lm_class():
    """CtxbenchLM: lm-eval's ``LM`` with the methods of ``_OverBackend``."""
    from lm_eval.api.model import LM

    class CtxbenchLM(_OverBackend, LM):
        __doc__ = _OverBackend.__doc__

    return CtxbenchLM


class _OverBackend:
    """The methods of lm-eval's ``LM`` over a ctxbench backend (an object, or built from ``model`` + ``backend`` name
    + args), kept apart from ``LM`` so lm-eval is imported only when the class is asked for (``_lm_class``).

    Decoding is greedy whatever a task's generation_kwargs ask; prompts are sent as lm-eval renders them
    (lm-eval applies the chat template itself when run with apply_chat_template).
    """

    def __init__(self, backend: Any = None, *, model: str | None = None, backend_name: str = "hf",
                 batch_size: int | str | None = None, max_batch_size: int | None = None, device: str | None = None,
                 **backend_args: Any):
        super().__init__()
        if backend is None or isinstance(backend, str):
            from ctxbench.harness.core import registry

            backend_name = backend if isinstance(backend, str) else backend_name
            if not model:
                raise ConfigError("model: CtxbenchLM needs a backend object or model=<alias, dir or hub id>")
            if device is not None:
                backend_args.setdefault("device", device)
            if batch_size not in (None, "auto") and backend_name == "hf":
                backend_args.setdefault("batch_size", int(batch_size))
            backend = registry.get("backend", backend_name, field="backend")(model=model, **backend_args)
        self.backend = backend
        self.tokenizer = backend.tokenizer

    # -- scoring ----------------------------------------------------------------------------------
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        fn = self._need("loglikelihood")
        out = [(float(ll), bool(g)) for ll, g in fn([tuple(r.args) for r in requests])]
        for r, o in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood", r.args, o)
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        fn = self._need("loglikelihood_rolling")
        out = [float(x) for x in fn([r.args[0] for r in requests])]
        for r, o in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, o)
        return out

    def _need(self, method: str):
        if "loglikelihood" not in getattr(self.backend, "capabilities", frozenset()):
            raise ConfigError(
                f"backend {getattr(self.backend, 'name', '?')!r}: cannot compute log-likelihoods, which lm-eval "
                "multiple-choice and perplexity tasks need; use the hf backend, or generative tasks only"
            )
        return getattr(self.backend, method)

    # -- generation -------------------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        from ctxbench.harness.core.types import Request

        reqs, stops = [], []
        for i, r in enumerate(requests):
            context, kwargs = r.args
            kwargs = dict(kwargs or {})
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(kwargs.get("max_gen_toks") or kwargs.get("max_new_tokens") or 256)
            reqs.append(Request(f"lmeval#{i}", context, max_new, add_special_tokens=not self._starts_with_bos(context),
                                user_text=context))
            stops.append(until)
        out = []
        preds = self.backend.generate(reqs)
        for r, p, until in zip(requests, preds, stops):
            if p.error:
                raise RuntimeError(f"backend failed on an lm-eval request: {p.error}")
            text = p.text
            for stop in until:
                if stop:
                    text = text.split(stop)[0]
            out.append(text)
            self.cache_hook.add_partial("generate_until", r.args, text)
        return out

    def _starts_with_bos(self, text: str) -> bool:
        bos = getattr(self.tokenizer, "bos_token", None)
        return bool(bos) and text.startswith(bos)

    # -- chat templates ---------------------------------------------------------------------------
    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(chat_history, tokenize=False, add_generation_prompt=add_generation_prompt,
                                                  continue_final_message=not add_generation_prompt)

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name_or_path", "")).replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return getattr(self.tokenizer, "chat_template", None) if chat_template else None

    def get_model_info(self) -> dict:
        info = self.backend.info() if hasattr(self.backend, "info") else {}
        return {"ctxbench_backend": getattr(self.backend, "name", "?"), **{f"ctxbench_{k}": v for k, v in info.items()}}


# ---- running lm-eval ------------------------------------------------------------------------------


@functools.cache
def _task_manager(include_path: tuple[str, ...], metadata: str, include_defaults: bool):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(include_path) or None, metadata=json.loads(metadata) or None,
                       include_defaults=include_defaults)


def task_manager(include_path: str | list[str] | None = None, metadata: dict | None = None, include_defaults: bool = True):
    """lm-eval's TaskManager, cached per arguments: indexing lm-eval's ~15k builtin task YAMLs takes seconds.

    include_defaults=False indexes only include_path (fast; enough for exported ctxbench tasks)."""
    paths = [include_path] if isinstance(include_path, (str, Path)) else list(include_path or [])
    for p in paths:
        if not Path(p).is_dir():
            raise ConfigError(f"include_path: {p} is not a directory of lm-eval task YAMLs")
    if not paths and not include_defaults:
        raise ConfigError("include_path: needed when lm-eval's builtin tasks are left out")
    return _task_manager(tuple(str(Path(p).resolve()) for p in paths), json.dumps(metadata or {}, sort_keys=True),
                         include_defaults)


def check_tasks(names: list[str], manager) -> None:
    import difflib

    known = set(manager.all_tasks)
    for n in names:
        if n not in known:
            close = difflib.get_close_matches(n, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; list them with `lm_eval ls tasks`, or add --include-path"
            raise ConfigError(f"tasks: lm-eval has no task, group or tag {n!r}{hint}")


def evaluate(backend: Any, tasks: list[str], *, num_fewshot: int | None = None, limit: int | float | None = None,
             include_path: str | list[str] | None = None, seed: int = 42, apply_chat_template: bool = False,
             fewshot_as_multiturn: bool = False, system_instruction: str | None = None, gen_kwargs: str | None = None,
             bootstrap_iters: int = 100000, metadata: dict | None = None, include_defaults: bool = True) -> dict[str, Any]:
    """Run lm-eval tasks (names of tasks, groups or tags) through a ctxbench backend; samples are logged.

    Seeds (python, numpy, torch, few-shot sampler) are all ``seed``. Returns lm-eval's results dict, plus
    ``seconds`` (wall time of the evaluation).
    """
    import lm_eval

    if not tasks:
        raise ConfigError("tasks: name at least one lm-eval task, e.g. mmlu or arc_easy")
    meta = {"pretrained": str(getattr(backend, "path", "") or getattr(backend.tokenizer, "name_or_path", ""))}
    manager = task_manager(include_path, {**meta, **(metadata or {})}, include_defaults)
    check_tasks(tasks, manager)
    lm = _lm_class()(backend)
    start = time.perf_counter()
    results = lm_eval.simple_evaluate(
        model=lm, tasks=list(tasks), num_fewshot=num_fewshot, limit=limit, bootstrap_iters=bootstrap_iters,
        log_samples=True, task_manager=manager, apply_chat_template=apply_chat_template,
        fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction, gen_kwargs=gen_kwargs,
        random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed, fewshot_random_seed=seed,
    )
    results["seconds"] = time.perf_counter() - start
    results["requested"] = list(tasks)
    return results


# ---- lm-eval results -> run-store rows --------------------------------------------------------------


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
