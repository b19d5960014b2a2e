"""Running a study: held-out split -> per (method, seed) data and training -> the untrained row -> scoring -> report.

Every step resumes by construction: data directories are named by what they depend on, a training's run id
hashes its config and its data (its checkpoint lives under train/<run id>/model, so a changed packing trains
anew and never overwrites or resumes another training), and a scoring run is marked done in state.json under
its run id and the checkpoint's identity. Training all methods before scoring any keeps multi-GPU ranks in step.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from rich.markup import escape

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.io import atomic_dir, atomic_write_json
from ctxbench.harness.run.runner import MANIFEST
from ctxbench.harness.studies.config import (
    UNTRAINED,
    MethodSpec,
    StudyConfig,
    load_eval_suite,
    study_inputs,
    trainer_class,
    trainer_config,
)
from ctxbench.harness.studies.heldout import Heldout, split_heldout
from ctxbench.harness.studies.progress import StudyProgress, check_eval_data
from ctxbench.trainers.base import ScratchModel


@dataclass(frozen=True)
class Trained:
    """One (method, seed) training, as the report needs it."""

    method: str
    seed: int
    run_id: str
    checkpoint: Path
    run_dir: Path
    steps: int
    tokens: int
    train_loss: float | None
    eval_loss: float | None
    data_hash: str
    diagnostics: dict[str, Any] | None


@dataclass(frozen=True)
class Scored:
    """One scoring run: a method's seed, or the untrained model (seed None: one run for every seed)."""

    method: str
    seed: int | None
    model: str
    run_id: str


@dataclass(frozen=True)
class StudyResult:
    out_dir: Path
    trained: tuple[Trained, ...]
    scored: tuple[Scored, ...]
    summary: Path  # study.md
    html: Path  # study.html
    json: Path  # study.json


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0  # under torchrun every rank trains; only rank 0 scores


def run_study(study: StudyConfig, *, console: Any = None, data_dir: Path | None = None) -> StudyResult | None:
    """Make data and train every (method, seed), then score every checkpoint and the untrained model, then report.
    Ranks other than 0 return None after training."""
    from rich.console import Console

    console = console or Console(stderr=True)
    corpus_path = str(study.corpus.get("path", ""))
    if not corpus_path.startswith("stdlib:") and not Path(corpus_path).expanduser().exists():  # before anything is written
        raise ConfigError(f"corpus.path: {corpus_path} does not exist; point it at a .jsonl/.parquet file or a directory, "
                          "or use 'stdlib:'")
    env_dir = os.environ.get("CTXBENCH_DATA_DIR")
    data_dir = data_dir or (Path(study.eval.data_dir) if study.eval.data_dir else Path(env_dir) if env_dir else None)
    check_eval_data(load_eval_suite(study.eval, where="study"), study.tokenizer, data_dir)
    root = study.root()
    root.mkdir(parents=True, exist_ok=True)
    progress = StudyProgress(study.name)
    with _one_writer(root), progress.stopped_here():
        return _run_study(study, console, data_dir, progress)


def _one_writer(root: Path):
    """One study process per output directory (torchrun: rank 0 holds it for all ranks)."""
    import contextlib

    from ctxbench.harness.core.locks import output_writer

    if not _is_main():
        return contextlib.nullcontext()
    return output_writer(root, what=f"study {root}", fix="wait for it to finish; its rerun then skips every finished step")


def _run_study(study: StudyConfig, console: Any, data_dir: Path | None, progress: StudyProgress) -> StudyResult | None:
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    root = study.root()
    suite = load_eval_suite(study.eval, where="study")
    heldout = None
    with FileLock(str(root / ".prepare.lock")):  # torchrun ranks: the first makes the corpus copy and the split
        corpus = resolve_corpus(study.corpus, root)
        if study.perplexity is not None:
            p = study.perplexity
            heldout = split_heldout(corpus, documents=p.documents, min_tokens=p.shortest, seed=p.seed,
                                    tokenizer=study.tokenizer, root=root)
            corpus = heldout.train_corpus
    jobs = [(m, seed) for m in study.methods for seed in study.seeds]
    trained = []
    for i, (m, seed) in enumerate(jobs, 1):
        progress.at(f"making data for and training {m.name} seed {seed}, training {i} of {len(jobs)}")
        trained.append(_train(study, m, seed, corpus, heldout, data_dir, console))
    if not _is_main():
        return None
    suite = with_perplexity(study, suite, heldout)
    state = _State(root / "state.json")
    progress.at("building the untrained starting checkpoint")
    todo = [(UNTRAINED, seed, model) for seed, model in _untrained(study, trained)]
    todo += [(t.method, t.seed, str(t.checkpoint)) for t in trained]
    scored = []
    for i, (method, seed, model) in enumerate(todo, 1):
        label = f"{method}/s{seed}" if seed is not None else method
        progress.at(f"scoring {label}, run {i} of {len(todo)}")
        scored.append(_score(study, method, seed, model, suite, state, console, data_dir))
    from ctxbench.harness.studies.report import write_report

    progress.at("writing the report")
    paths = write_report(study, trained, scored, heldout)
    console.print(escape(f"[study {study.name}] report: {paths['markdown']}"))
    return StudyResult(root, tuple(trained), tuple(scored), paths["markdown"], paths["html"], paths["json"])


def _train(study: StudyConfig, m: MethodSpec, seed: int, corpus: dict[str, Any], heldout: Heldout | None,
           data_dir: Path | None, console) -> Trained:
    tag = escape(f"[{m.name} seed {seed}]")
    inputs = study_inputs(study, m, seed, corpus, data_dir)
    cfg = trainer_config(study, m, seed, inputs)
    trainer = trainer_class(study.trainer_of(m), where=f"methods.{m.name}")(cfg, console=console)
    data = trainer.data  # makes the data (packing ...) if needed, resumably
    docs = trainer.corpus_documents() if heldout is not None else None
    if docs:
        leaked = sorted(docs & heldout.ids)
        if leaked:
            raise ConfigError(f"methods.{m.name}: its training data holds {len(leaked)} held-out documents (e.g. {leaked[0]!r}); "
                              f"trainer {trainer.name!r} must read the study corpus with its exclude_ids")
    if trainer.is_finished():
        console.print(f"{tag} already trained: {trainer.output_dir}")
    else:
        console.print(f"{tag} training ({trainer.name}) on {data.info.get('tokens') or len(data.train)} "
                      f"{'tokens' if data.info.get('tokens') else 'examples'}")
    result = trainer.train()
    runs = getattr(trainer, "results", None) or [result]  # a staged trainer (hqa_sft): every stage's steps and tokens
    return Trained(m.name, seed, result.run_id, result.checkpoint, result.run_dir, sum(r.steps for r in runs),
                   sum(r.tokens for r in runs), result.train_loss, result.eval_loss, data.data_hash,
                   trainer.data_diagnostics() if _is_main() else None)


def _untrained(study: StudyConfig, trained: list[Trained]) -> list[tuple[int | None, str]]:
    """The starting checkpoint: the base model as loaded for training (RoPE changes applied), one for every seed;
    a from-scratch model's random init differs by seed, so it is built and scored per seed."""
    scratch = isinstance(study.base_model, ScratchModel)
    if not scratch and not study.training.get("rope"):
        return [(None, study.base_model)]
    out = []
    for seed in (study.seeds if scratch else [None]):
        first = next(t for t in trained if scratch is False or t.seed == seed)
        out.append((seed, str(_save_initial(study, first, seed))))
    return out


def _save_initial(study: StudyConfig, t: Trained, seed: int | None) -> Path:
    """Build the model exactly as training did (HFTrainer.build_model: init seed, RoPE) and save it untrained."""
    from ctxbench.trainers.loop import HFTrainer

    record = json.loads((t.run_dir / "record.json").read_text())
    m = next(x for x in study.methods if x.name == t.method)
    cls = trainer_class(study.trainer_of(m), where=f"methods.{m.name}")
    trainer = cls(cls.config_cls(**record["config"]))
    c = trainer.config
    key = hashlib.sha256(json.dumps([trainer.base_name, c.model_dump(mode="json")["base_model"], c.seed if seed is not None else None,
                                     c.rope.model_dump() if c.rope else None, record["seq_len"]], sort_keys=True).encode())
    dest = study.root() / "untrained" / f"{'seed' + str(seed) if seed is not None else 'base'}-{key.hexdigest()[:10]}"
    if (dest / MANIFEST).exists():
        return dest
    model = HFTrainer.build_model(trainer, trainer.data)
    with atomic_dir(dest) as tmp:
        model.save_pretrained(tmp)
        trainer.tokenizer.save_pretrained(tmp)
        atomic_write_json(tmp / MANIFEST, {"trainer": "untrained", "run_id": None, "label": UNTRAINED, "steps": 0,
                                           "base_model": trainer.base_name, "base_model_gguf": trainer.base_gguf(),
                                           "seed": c.seed if seed is not None else None, "rope": c.rope.model_dump() if c.rope else None})
    return dest


def with_perplexity(study: StudyConfig, suite, heldout: Heldout | None):
    """The eval suite plus the held-out perplexity tasks, at the perplexity lengths."""
    if heldout is None:
        return suite
    from ctxbench.harness.core.config import TaskSpec

    p = study.perplexity
    tasks = [TaskSpec(task=f"ppl/{mode}", name=f"ppl/heldout-{mode}", lengths=p.lengths,
                      args={"source": "jsonl", "path": str(heldout.path), "min_tokens": heldout.min_tokens,
                            "documents": p.documents, **({"stride": p.stride} if mode == "sliding" and p.stride else {})})
             for mode in p.modes]
    return suite.model_copy(update={"tasks": [*suite.tasks, *tasks]})


class _State:
    """state.json: which scoring runs finished, keyed by what they scored. A note, not the truth: a step counts as
    done only while the store still holds its run with every planned sample (`_scored`)."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def done(self, step: str, key: str) -> bool:
        return self.data.get(step) == key

    def mark(self, step: str, key: str) -> None:
        self.data[step] = key
        atomic_write_json(self.path, self.data)


def _score(study: StudyConfig, method: str, seed: int | None, model: str, suite, state: _State, console,
           data_dir: Path | None) -> Scored:
    from ctxbench.harness.run.runner import RunPlan, run, training_provenance

    label = f"{method}/s{seed}" if seed is not None else method
    plan = RunPlan(suite, model, study.eval.backend, dict(study.eval.backend_args), study.root() / "runs", data_dir, label=label)
    key = json.dumps(training_provenance(model), sort_keys=True)
    if not _scored(plan, state, key):
        console.print(escape(f"[{label}] scoring {model}"))
        outcome = run(plan, console=console)
        if outcome.failed:
            raise ConfigError(f"{label}: {outcome.failed} samples failed ({dict(outcome.errors)}); rerun the study to retry them")
        state.mark(outcome.store.dir.name, key)
        return Scored(method, seed, model, outcome.store.dir.name)  # the id the plan step resolved (dtype auto)
    return Scored(method, seed, model, plan.run_id())


def _scored(plan, state: _State, key: str) -> bool:
    """Done only if state.json says so AND the run is in the store with every planned sample scored: a deleted or
    partial runs/ directory is scored again (the runner resumes what is left)."""
    from ctxbench.harness.core.store import RunStore

    store = RunStore(plan.out_dir, plan.run_id())
    if not state.done(plan.run_id(), key) or not store.record_path.exists():
        return False
    planned = sum(int(n) for lengths in store.read_record().get("plan", {}).values() for n in lengths.values())
    return planned > 0 and len(store.done_ids()) >= planned
