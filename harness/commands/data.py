"""`ctxbench data pack|inspect|methods`: data synthesis through the one core (trainers/data/synthesis.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer

from ctxbench.harness.cli_common import err, out, writable_dir

data_app = typer.Typer(help="Synthesize packed long-context training data (standard, SPLICE, Quest, kNN, ICLM) "
                            "and inspect it.")


@data_app.command("pack")
def data_pack(
    config: Path = typer.Option(..., "--config", help="synthesis YAML (see configs/data/)"),
    out_dir: Optional[str] = typer.Option(None, "--out", help="override out_dir"),
    budget_tokens: Optional[int] = typer.Option(None, help="override budget_tokens"),
    seed: Optional[int] = typer.Option(None, help="override seed"),
    method: Optional[str] = typer.Option(None, "--method", help="synthesis method (`ctxbench data methods`), e.g. a "
                                         "plugin's; default: the config's `method`"),
):
    """Pack a corpus into fixed-length sequences (shards + manifest), or run any synthesis method on its config
    (`data hqa` and `data logo` are this command's spellings for those two); rerunning resumes an interrupted run.
    One process writes an out_dir at a time."""
    from ctxbench.harness.core.extras import require_extra
    from ctxbench.harness.core.progress import progress
    from ctxbench.trainers.data.pipeline import load_config, synthesize, with_stdlib_corpus

    chosen = method or _config_method(config)
    if chosen is not None and chosen not in _packing_names():
        return run_method(chosen, config, overrides={"out_dir": out_dir, "budget_tokens": budget_tokens, "seed": seed})
    require_extra("train", modules=("transformers",), for_="ctxbench data pack")  # the tokenizer
    cfg = load_config(config, out_dir=out_dir, budget_tokens=budget_tokens, seed=seed, method=method)
    writable_dir(Path(cfg.out_dir), "--out" if out_dir else "out_dir")
    cfg = with_stdlib_corpus(cfg)
    from ctxbench.trainers.data.corpus import corpus_identity

    for corpus in (cfg.corpus, cfg.mix_corpus):  # path and format refused before the bar appears
        if corpus is not None:
            corpus_identity(corpus)
    with progress(err, unit="tok", transient=True) as bar:  # transient: a refusal while reading leaves its line only
        task = bar.add_task(f"{cfg.method} -> {cfg.out_dir}", total=cfg.budget_tokens)
        m = synthesize(cfg, progress=lambda done, total: bar.update(task, completed=done, total=total))
    timing = m.stats.get("timing", {})
    out.print(f"{m.method}: {m.num_sequences} sequences x {m.seq_len} = {m.tokens:,} tokens in {len(m.shards)} shards "
              f"at {cfg.out_dir} (corpus {timing.get('load_corpus_seconds', 0)}s, prepare "
              f"{timing.get('prepare_seconds', 0)}s, pack {timing.get('pack_seconds', 0)}s)")
    out.print_json(json.dumps(m.stats.get("methods", {})))


@data_app.command("inspect")
def data_inspect(
    shards: list[Path] = typer.Argument(..., help="one or more synthesis directories (with manifest.json)"),
    sample: int = typer.Option(256, help="sequences sampled per method for Zipf and similarity"),
    embed: str = typer.Option("tfidf", help="document similarity: tfidf (token ids, no model) or minilm"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the diagnostics as JSON here"),
):
    """Tokens, documents per sequence, domain mix, burstiness (Zipf), in-sequence similarity, duplicates."""
    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.trainers.data.diagnostics import inspect, table

    if embed not in ("tfidf", "minilm"):
        raise ConfigError(f"--embed: expected tfidf or minilm, got {embed!r}")
    reports = [inspect(p, sample=sample, embed=embed) for p in shards]
    out.print(table(reports))
    if json_out:
        json_out.write_text(json.dumps(reports, indent=1))
        out.print(f"wrote {json_out}")


def _packing_names() -> list[str]:
    from ctxbench.trainers.data.methods import method_names

    return method_names()


def _config_method(config: Path) -> str | None:
    """The `method` a data config names (None: it names none, and the packing config's own check says so)."""
    from ctxbench.harness.core.config import read_yaml_mapping, resolve_config

    raw = read_yaml_mapping(resolve_config(config, kind="data", field="--config"), field="--config", expect="config keys")
    return raw.get("method") if isinstance(raw.get("method"), str) else None


@dataclass(frozen=True)
class MethodView:
    """How the command line shows one synthesis method's run, whichever command spells it: a progress bar (its unit
    and label, and the run options that feed it) and a summary of the finished manifest."""

    progress_kwargs: Callable[[LazyBar], dict[str, Any]]
    report: Callable[[dict[str, Any], Any], None]
    unit: str | None = None
    label: str = ""


_VIEWS: dict[str, MethodView] = {}


def add_method_view(name: str, view: MethodView) -> None:
    """Show synthesis method `name` with `view` (a method without one gets one summary line and no bar)."""
    _VIEWS[name] = view


class LazyBar:
    """A progress bar shown from a method's first progress call on: bad input found before it is one line, no bar."""

    def __init__(self, unit: str | None, label: str):
        from ctxbench.harness.core.progress import progress

        self.bar = progress(err, unit=unit)
        self.job = self.bar.add_task(label, total=None)

    def _show(self) -> None:
        if not self.bar.live.is_started:
            self.bar.start()

    def advance(self, n: int) -> None:
        self._show()
        self.bar.advance(self.job, n)

    def update(self, done: int, total: int) -> None:
        self._show()
        self.bar.update(self.job, completed=done, total=total)

    def stop(self) -> None:
        self.bar.stop()


def run_method(name: str, config: Path, *, command: str | None = None, overrides: dict[str, Any] | None = None,
               run_kwargs: dict[str, Any] | None = None) -> None:
    """A synthesis method other than a packing (hqa, logo, a plugin's): its own config keys, the one skeleton. The one
    code path of `data pack --method NAME` and of its spellings `data hqa` and `data logo` (`command` names the
    spelling in a refusal); overrides of None are ignored; run_kwargs go to the method's run step."""
    from ctxbench.harness.core.config import read_yaml_mapping, resolve_config, validate_config
    from ctxbench.trainers.data.synthesis import get_synthesis, synthesize

    spec = get_synthesis(name, field="--method")
    spec.require_extra(for_=command or f"ctxbench data pack --method {name}")  # before its config is read or anything written
    path = resolve_config(config, kind="data", field="--config")
    raw = {k: v for k, v in read_yaml_mapping(path, field="--config", expect="config keys").items() if k != "method"}
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    cfg = validate_config(spec.config, {**raw, **given}, where=path.name)
    writable_dir(Path(cfg.out_dir), "--out" if "out_dir" in given else "out_dir")
    _check_generator(cfg)
    view = _VIEWS.get(name)
    if view is None:
        synthesize(spec, cfg, **(run_kwargs or {}))
        return _summary(name, cfg)
    bar = LazyBar(view.unit, f"{name} -> {cfg.out_dir}{view.label}")
    try:
        m = synthesize(spec, cfg, **(run_kwargs or {}), **view.progress_kwargs(bar))
    finally:
        bar.stop()
    view.report(m, cfg)


def _check_generator(cfg: Any) -> None:
    """A generator's backend arguments are checked before the method starts (bad input: one line, nothing written)."""
    gen = getattr(cfg, "generator", None)
    if gen is not None and hasattr(gen, "backend_args"):
        from ctxbench.harness.backends.args import check_backend_args

        check_backend_args(gen.backend, gen.backend_args, where="generator.")


def _summary(name: str, cfg: Any) -> None:
    from ctxbench.trainers.data.synthesis import read_manifest

    m = read_manifest(cfg.out_dir) or {}
    drops = ", ".join(f"{k} {v}" for k, v in m.get("drops", {}).items()) or "none"
    out.print(f"{name}: {len(m.get('shards', []))} shards at {cfg.out_dir} (complete: {m.get('complete')}; drops: {drops})",
              highlight=False)


@data_app.command("methods")
def data_methods():
    """List every synthesis method (the packings, hqa, logo, plugins' own), what it produces (which trainer, so which
    study, can train on it) and its arguments: a packing's method_args, any other method's config keys."""
    from rich.table import Table

    from ctxbench.trainers.data.synthesis import get_synthesis, synthesis_names

    t = Table(title="synthesis methods (`ctxbench data pack --method NAME`; packings: method_args of the pack config)")
    for col in ("method", "argument", "default", "help"):
        t.add_column(col)
    for name in synthesis_names():
        spec = get_synthesis(name)
        produces = f"produces {spec.produces}" if spec.produces else "produces nothing declared (no study can train on it)"
        t.add_row(f"[bold]{name}[/]", "", "", f"{spec.help} · {produces}")
        for arg, field in (spec.args or spec.config).model_fields.items():
            default = "required" if field.is_required() else repr(field.get_default(call_default_factory=True))
            t.add_row("", arg, default, field.description or "")
    out.print(t)


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
