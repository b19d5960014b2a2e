"""Turn the results store into the board's frames; keep imported published results beside them.

- `scores`: one row per distinct scored sample. A sample scored in several runs of one model counts once: rows are
  deduplicated by (model fingerprint, seed, sample id, prompt hash), a scored row winning over an errored one and
  a later run over an earlier one. A label whose runs hold different weights is split into one model per
  fingerprint ("name [1a2b3c4d]"), never averaged together.
- `cells`: per (model, task, length) how many samples were planned (the runs' records), done (scored), errored
  (the last attempt failed) and pending (never run): the board's denominators.
- `runs`: the provenance of every run (suite, seed, samples per cell, dates, ctxbench version and commit, model
  fingerprint), for the report's header.

Stored rows are read with the store's one reader (core.io.read_jsonl): a corrupt line is skipped with a warning
naming file:line, and counted in `skipped`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.redact import printable
from ctxbench.harness.core.store import SCORED, TRAINING, RunStore, error_reason, list_runs, record_kind, run_dirs
from ctxbench.harness.core.types import board_name, run_fingerprint, sample_of

from .cost import COST_COLUMNS, NO_TOKENS, cell_tokens
from .reported_store import REPORTED_DIR, import_reported, reported_frame  # noqa: F401 - the store's published tables

SCORE_COLUMNS = ["model", "run_id", "task", "category", "length", "depth", "index", "seed", "score", "position", "source",
                 "claimed_length", "prediction", "answers", "fingerprint", "prompt_hash", "empty", "cluster", "repeat_scores"]
# repeat_scores: a sample's score in each of its repeats (--repeats k), in repeat order; () for a single generation
# unfinished: samples whose reasoning never closed (thinking_unfinished, counted 0); reasoning_tokens: their mean per cell
CELL_COLUMNS = ["model", "task", "length", "planned", "done", "errored", "pending", "errors", "unfinished", "reasoning_tokens",
                "stopped", "sequential_lo", "sequential_hi", "sequential", "over_budget", *COST_COLUMNS]
# stopped: samples a sequential run (--until) never scored because its verdict at that length was known (not pending);
# sequential_lo/hi/sequential: that length's anytime-valid interval and its decision in words (harness/adaptive.py)


@dataclass
class StoreFrames:
    scores: pd.DataFrame
    cells: pd.DataFrame
    runs: pd.DataFrame
    skipped: list[str] = field(default_factory=list)  # corrupt lines skipped, as file:line
    notes: list[str] = field(default_factory=list)  # what the reader decided (duplicates merged, labels split)


def fingerprint(rec: dict[str, Any]) -> str:
    """The weights a run's rows are filed under; a model-free backend's (echo) names the backend, also in old records."""
    return run_fingerprint(str(rec.get("backend") or ""), str(rec.get("model_fingerprint") or f"name:{rec.get('model', '?')}"))


def short_fingerprint(fp: str) -> str:
    return fp.rsplit(":", 1)[-1][:8]  # the hash of `gguf:<hash>`, `echo:gguf:<hash>`


def select_runs(root: Path, run_ids: list[str] | None = None) -> list[RunStore]:
    stores = list_runs(root)
    if run_ids:
        known = {s.dir.name: s for s in stores}
        missing = [r for r in run_ids if r not in known]
        trainings = {d.name for d in run_dirs(root, TRAINING)}
        unknown = dict(unknown_kinds(root))
        if missing and missing[0] in unknown:
            raise ConfigError(f"--runs: {missing[0]} is a run of kind {unknown[missing[0]]!r}, which this ctxbench does not "
                              "know (a newer ctxbench wrote it?); upgrade ctxbench to read it, or leave it out")
        if missing and missing[0] in trainings:
            raise ConfigError(f"--runs: {missing[0]} is a training, not a scored run; score its checkpoint "
                              f"(`ctxbench score --model {Path(root) / missing[0] / 'model'}`) and name that run")
        if missing:
            raise ConfigError(f"--runs: no run {missing[0]!r} in {root}; known: {', '.join(sorted(known)) or 'none'}")
        stores = [known[r] for r in run_ids]
    return stores


def load_store(root: Path, run_ids: list[str] | None = None) -> StoreFrames:
    frames = store_frames(select_runs(root, run_ids))
    frames.notes += [f"run {name} is of kind {kind!r}, which this ctxbench does not know (a newer ctxbench wrote it?); "
                     "skipped" for name, kind in unknown_kinds(root) if not run_ids or name in run_ids]
    return frames


def unknown_kinds(root: Path) -> list[tuple[str, str]]:
    """(run directory, kind) of the records that are neither a scoring nor a training: never silently left out."""
    known = {d.name for kind in (SCORED, TRAINING) for d in run_dirs(root, kind)}
    out = []
    for path in sorted(Path(root).glob("*/record.json")):
        if path.parent.name in known:
            continue
        try:
            out.append((path.parent.name, record_kind(json.loads(path.read_text(encoding="utf-8")))))
        except (OSError, ValueError, AttributeError):
            continue
    return out


def runs_frame(root: Path, run_ids: list[str] | None = None) -> pd.DataFrame:
    """One row per distinct scored sample of the runs (see the module docstring)."""
    return load_store(root, run_ids).scores


def store_frames(stores: list[RunStore]) -> StoreFrames:
    runs = [(s, s.read_record(), s.latest()) for s in stores]
    runs.sort(key=lambda t: (t[1].get("created") or "", t[1]["run_id"]))  # later runs win ties between duplicates
    fps, precisions, notes = _shared_labels([rec for _, rec, _ in runs])

    units: dict[tuple, tuple[int, dict[str, Any], dict[str, Any]]] = {}  # key -> (rank, row, run info)
    pending: dict[tuple, tuple[str, int]] = {}
    stopped: dict[tuple, tuple[str, int]] = {}  # a sequential run's samples after its stopping round
    sequential: dict[tuple[str, int], dict[str, Any]] = {}  # (model, length) -> the verdict, for lengths still a prefix
    provenance, duplicates, bad_rows = [], 0, []
    for order, (store, rec, latest) in enumerate(runs):
        fp, seed = fingerprint(rec), int(rec.get("seed") or 0)
        model = _model_name(rec, fps, precisions)
        info = {"model": model, "run_id": rec["run_id"], "seed": seed, "fingerprint": fp,
                "claimed_length": rec.get("backend_args", {}).get("context_length", math.nan)}
        losses = loss_tasks(rec, latest)
        ends, verdicts = sequential_prefixes(store.dir, latest)
        sequential.update({(model, length): v for length, v in verdicts.items()})
        notes += [f"{model}, sequential run {rec['run_id']}: {line}" for line in sequential_words(verdicts)]
        for sid, row in latest.items():
            if row.get("task") in losses:
                continue  # perplexity rows are losses, not 0..1 scores: the summary and studies read them
            if row.get("task") is None or row.get("length") is None:
                bad_rows.append(f"{store.dir.name}: {sid} (no task or length)")
                continue
            key = (model, fp, seed, sid, row.get("prompt_hash") or "")
            rank = (2 if row.get("score") is not None else 1) * 10**6 + order  # scored beats errored; later beats earlier
            if key in units:
                duplicates += row.get("score") is not None and units[key][1].get("score") is not None
                if units[key][0] > rank:
                    continue
            units[key] = (rank, row, info)
        for sid, task, length, late in _unscored(rec, latest, losses, ends):
            (stopped if late else pending)[(model, fp, seed, sid)] = (task, length)
        provenance.append(_provenance(store, rec, latest, model, fp, losses))
        if losses:
            notes.append(f"run {rec['run_id']}: {', '.join(sorted(losses))} (perplexity) is not on the board; "
                         "ctxbench score prints it and studies report it")
    if duplicates:
        notes.append(f"{duplicates} samples were scored in more than one run of the same model; each counts once")
    have = {k[:4] for k in units}
    pending = {k: v for k, v in pending.items() if k not in have}
    stopped = {k: v for k, v in stopped.items() if k not in have and k not in pending}

    scored = average_repeats([_score_row(row, info) for _, row, info in units.values() if row.get("score") is not None])
    scores = pd.DataFrame(scored, columns=SCORE_COLUMNS) if scored else pd.DataFrame(columns=SCORE_COLUMNS)
    skipped = [where for s in stores for where in s.read_stats.bad] + bad_rows
    return StoreFrames(scores, _cells(units, pending, stopped, sequential), pd.DataFrame(provenance), skipped, notes)


def _shared_labels(records: list[dict[str, Any]]) -> tuple[dict[str, set[str]], dict[str, set[str]], list[str]]:
    """Each label's weights fingerprints and precisions, and a note for a label that names several of either (each
    is then shown apart, its fingerprint or precision after its name)."""
    fps: dict[str, set[str]] = defaultdict(set)
    precisions: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        fps[_label(rec)].add(fingerprint(rec))
        precisions[_label(rec)].add(precision(rec))
    notes = [f"{label!r} names runs of {len(f)} different models (weights fingerprints); each is shown apart, "
             "its fingerprint after its name" for label, f in sorted(fps.items()) if len(f) > 1]
    notes += [f"{label!r} names runs at {len(p)} precisions ({', '.join(sorted(x or '?' for x in p))}); each is shown "
              "apart, its precision after its name" for label, p in sorted(precisions.items()) if len(p) > 1]
    return fps, precisions, notes


def _unscored(rec: dict[str, Any], latest: dict[str, Any], losses: set[str],
              ends: dict[tuple[str, int], int]) -> Iterator[tuple[str, str, int, bool]]:
    """A run's planned samples without a row: (sample id, task, length, late), late where a sequential run stopped
    that length before reaching the sample (stopped, not pending)."""
    for task, per_length in (rec.get("plan") or {}).items():
        if task in losses:
            continue
        for length, n in per_length.items():
            for j in range(int(n)):
                sid = f"{task}@{length}#{j}"
                if sid not in latest:
                    yield sid, task, int(length), j >= ends.get((task, int(length)), int(n))


def precision(rec: dict[str, Any]) -> str:
    """The dtype the run's weights ran in, as the backend resolved it (an `auto` resolved; "" when it does not say)."""
    dtype = (rec.get("backend_args") or {}).get("dtype")
    return "" if dtype in (None, "", "auto") else str(dtype)


def _model_name(rec: dict[str, Any], fps: dict[str, set[str]], precisions: dict[str, set[str]]) -> str:
    """The run's label, with its weights' fingerprint and its precision after it where its label names runs of other
    weights or other precisions (never averaged together)."""
    label = _label(rec)
    tags = [short_fingerprint(fingerprint(rec))] if len(fps[label]) > 1 else []
    tags += [precision(rec) or "precision ?"] if len(precisions[label]) > 1 else []
    return f"{label} [{', '.join(tags)}]" if tags else label


def sequential_prefixes(run_dir: Path, latest: dict[str, dict]) -> tuple[dict[tuple[str, int], int], dict[int, dict]]:
    """A sequential run's (task, length) -> stopping round, and length -> verdict, for the lengths it stopped for good
    and no later run without --until extended (then the cell is a full-N cell again)."""
    from ctxbench.harness.core.adaptive_state import read_state, stopped_samples

    state = read_state(run_dir)
    ends = stopped_samples(state)
    top: dict[tuple[str, int], int] = defaultdict(lambda: -1)  # the highest index scored per cell
    for r in latest.values():
        key = (str(r.get("task")), int(r.get("length") or 0))
        top[key] = max(top[key], int(r.get("index") or 0))
    extended = {length for (task, length), end in ends.items() if top[(task, length)] >= end}
    ends = {k: v for k, v in ends.items() if k[1] not in extended}
    rule = state.get("rule") or {}
    verdicts = {int(k): {**v, "rule": rule, "target": state.get("target", "")} for k, v in (state.get("lengths") or {}).items()
                if any(length == int(k) for _, length in ends)}
    return ends, verdicts


def sequential_words(verdicts: dict[int, dict]) -> list[str]:
    """Per stopped length in words: settled (which way, after how many rounds of N) or reached N undecided."""
    out = []
    for length, v in sorted(verdicts.items()):
        rule = v.get("rule") or {}
        how = f"--until {rule.get('until')}, alpha {rule.get('alpha')}, {v.get('target')}"
        if v.get("settled"):
            out.append(f"{length}: settled {v['decision']} after {v['rounds']} of {v['n']} rounds ({how})")
        else:
            out.append(f"{length}: reached {v['rounds']} of {v['n']} rounds undecided ({v.get('stopped')}; {how})")
    return out


def loss_tasks(rec: dict[str, Any], latest: dict[str, dict]) -> set[str]:
    """Tasks of a run kept off the percent board: scored by loss (perplexity) as its record names them, and any whose
    metric declares a raw scale or lower-is-better (harness/core/metrics.py metric_scale)."""
    from ctxbench.harness.core.metrics import metric_scale

    return set(rec.get("losses") or ()) | {str(r.get("task")) for r in latest.values()
                                           if not metric_scale(str(r.get("metric") or "")).on_percent_board}


def _label(rec: dict[str, Any]) -> str:
    """The model's name on the board: its label (`echo(label)` for a backend with no model output), and the run's
    protocol where it is not the default, so a thinking run and a non-thinking run of one model are two rows."""
    name = board_name(str(rec.get("label") or ""), str(rec.get("backend") or ""), str(rec.get("model") or "")) or rec["run_id"]
    protocol = protocol_text(rec.get("generation") or {})
    return printable(f"{name} [{protocol}]" if protocol else name)  # escape codes in a label stay visible text


def protocol_text(generation: dict[str, Any]) -> str:
    """`thinking on, 4096`, `T=0.7, top_p=0.9, 4 repeats`, `system prompt 1a2b3c4d`: what the record's protocol changes."""
    parts = []
    if generation.get("thinking", "off") != "off":
        parts.append(f"thinking {generation['thinking']}, {generation.get('max_thinking_tokens', '?')}")
    if generation.get("system_prompt") is not None:
        parts.append(f"system prompt {hashlib.sha256(str(generation['system_prompt']).encode()).hexdigest()[:8]}")
    parts += [("T" if k == "temperature" else k) + f"={v}" for k, v in sorted((generation.get("gen_kwargs") or {}).items())]
    if int(generation.get("repeats", 1) or 1) > 1:
        parts.append(f"{generation['repeats']} repeats")
    return ", ".join(parts)


def _score_row(row: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": info["model"], "run_id": info["run_id"], "task": row.get("task"), "category": row.get("category"),
        "length": row.get("length"), "depth": _depth(row), "index": row.get("index", 0), "seed": info["seed"],
        "score": row["score"], "position": row["position"] if row.get("position") is not None else math.nan,
        "source": "measured", "claimed_length": info["claimed_length"], "prediction": row.get("prediction", ""),
        "answers": row.get("answers", []), "fingerprint": info["fingerprint"], "prompt_hash": row.get("prompt_hash", ""),
        "empty": bool(row.get("empty", False)), "_repeat": int(row.get("repeat") or 0),
        "cluster": row.get("cluster"),  # samples sharing a haystack or document (stats: cluster-robust intervals)
    }


def average_repeats(scored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per sample: the mean score of its repeats (--repeats), before any statistic. The intervals and paired
    tests then see each sample once, its repeats as one cluster, never as independent samples."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in scored:
        groups[(row["model"], row["fingerprint"], row["seed"], row["task"], row["length"], row["index"],
                row["prompt_hash"])].append(row)
    out = []
    for rows in groups.values():
        first = min(rows, key=lambda r: r["_repeat"])  # its prediction and flags stand for the sample
        ordered = tuple(float(r["score"]) for r in sorted(rows, key=lambda r: r["_repeat"]))
        out.append({**first, "score": sum(ordered) / len(rows), "repeat_scores": ordered} if len(rows) > 1
                   else {**first, "repeat_scores": ()})
    return out


def _cells(units: dict, pending: dict, stopped: dict, sequential: dict) -> pd.DataFrame:
    counts: dict[tuple, Counter] = defaultdict(Counter)
    reasons: dict[tuple, Counter] = defaultdict(Counter)
    thinking: dict[tuple, list[int]] = defaultdict(list)
    failed: dict[tuple, bool] = {}  # per sample (its repeats together): whether some repeat errored
    for key, (_, row, info) in units.items():
        cell = (info["model"], row.get("task"), int(row.get("length") or 0))
        sample = (*cell, *key[1:3], sample_of(key[3]))
        if row.get("reasoning_tokens") is not None:
            thinking[cell].append(int(row["reasoning_tokens"]))
        counts[cell]["unfinished"] += row.get("failure") == "thinking_unfinished"
        counts[cell]["over_budget"] += bool(row.get("over_budget"))  # answers a server sent past max_new_tokens, cut
        failed[sample] = failed.get(sample, False) or row.get("score") is None
        if row.get("score") is None:
            reasons[cell][error_reason(str(row.get("error") or "error"))] += 1
    for sample, bad in failed.items():
        counts[sample[:3]]["errored" if bad else "done"] += 1
    for (model, *_), (task, length) in pending.items():
        counts[(model, task, length)]["pending"] += 1
    for (model, *_), (task, length) in stopped.items():
        counts[(model, task, length)]["stopped"] += 1
    rows, tokens = [], cell_tokens(units)  # each cell's token account (leaderboard/cost.py)
    for cell, c in sorted(counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
        errors = ", ".join(f"{k}: {v}" for k, v in reasons[cell].most_common())
        mean_thinking = sum(thinking[cell]) / len(thinking[cell]) if thinking[cell] else math.nan
        seq = sequential.get((cell[0], cell[2]), {})
        if cell[1] not in seq.get("tasks", [cell[1]]):
            seq = {}  # another run's task at that length: the anytime interval covers the sequential run's tasks only
        words = sequential_words({cell[2]: seq})[0].split(": ", 1)[1] if seq else ""
        vs = (seq.get("rule") or {}).get("until") == "vs"  # its interval is of the difference, not of the score
        lo, hi = (math.nan if vs or seq.get(k) is None else float(seq[k]) for k in ("lo", "hi"))
        rows.append((*cell, c["done"] + c["errored"] + c["pending"] + c["stopped"], c["done"], c["errored"], c["pending"],
                     errors, c["unfinished"], mean_thinking, c["stopped"], lo, hi, words, c["over_budget"],
                     *tokens.get(cell, NO_TOKENS)))
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def _provenance(store: RunStore, rec: dict[str, Any], latest: dict[str, dict], model: str, fp: str,
                losses: set[str]) -> dict[str, Any]:
    """A run's header row; its counts cover the board's tasks only (perplexity rows have no score, yet did not fail)."""
    plan = {t: n for t, n in (rec.get("plan") or {}).items() if t not in losses}
    latest = {sid: r for sid, r in latest.items() if r.get("task") not in losses}
    per_cell = sorted({int(n) for per_length in plan.values() for n in per_length.values()})
    sessions = [s.get("ended") or s.get("started") for s in rec.get("sessions") or [] if s.get("ended") or s.get("started")]
    versions = rec.get("versions") or {}
    done = sum(1 for r in latest.values() if r.get("score") is not None)
    return {
        "run_id": rec["run_id"], "model": model, "model_path": rec.get("model", ""), "fingerprint": fp,
        "tokenizer_fingerprint": rec.get("tokenizer_fingerprint", ""), "backend": rec.get("backend", ""),
        "suite": rec.get("suite", ""), "seed": "" if rec.get("seed") is None else int(rec["seed"]),
        "weights": weights_format(rec), "precision": precision(rec),
        "samples_per_cell": "–".join(map(str, sorted({per_cell[0], per_cell[-1]}))) if per_cell else "",
        "planned": sum(int(n) for per_length in plan.values() for n in per_length.values()), "done": done,
        "errored": sum(1 for r in latest.values() if r.get("score") is None),
        "created": rec.get("created", ""), "last_session": max(sessions, default=rec.get("created", "")),  # its end
        "ctxbench": versions.get("ctxbench", "?"), "commit": versions.get("ctxbench_commit", ""),
        "training": rec.get("training") or {},
    }


def weights_format(rec: dict[str, Any]) -> str:
    """How the scored weights are stored, when that changes them: a GGUF file's quantisation (from its name, as
    llama.cpp names them: ...Q4_K_M.gguf), also for a checkpoint trained from a dequantized GGUF base."""
    gguf = (rec.get("backend_args") or {}).get("gguf_file")
    base = (rec.get("training") or {}).get("base_model_gguf")
    if gguf:
        return f"GGUF {gguf_quantisation(gguf)}"
    return f"trained from GGUF {gguf_quantisation(base)}" if base else ""


def gguf_quantisation(name: str) -> str:
    match = re.search(r"(?i)(?:^|[._-])(I?Q\d+(?:_[A-Z0-9]+)*|BF16|F16|F32)(?=\.gguf$)", Path(str(name)).name)
    return match.group(1).upper() if match else "(quantisation not in the file name)"


def _depth(row: dict) -> float:
    """The depth axis of a sample: the requested grid depth if any, else its single needle's realised depth."""
    if row.get("depth") is not None:
        return float(row["depth"])
    depths = row.get("depths") or []
    return float(depths[0]) if len(depths) == 1 else math.nan


def examples(df: pd.DataFrame, per_task: int = 2) -> list[dict]:
    if df.empty or "prediction" not in df:
        return []
    pick = df[df["source"] == "measured"].groupby(["model", "task"], sort=True).head(per_task)
    return [
        {"model": r.model, "task": r.task, "length": int(r.length), "index": int(r.index), "score": float(r.score),
         "prediction": str(r.prediction), "reference": ", ".join(map(str, r.answers))}
        for r in pick.itertuples()
    ]
