"""`ctxbench train METHOD --config FILE`: run a registered trainer; rerunning resumes from its last checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.harness.cli_common import err, out, writable_dir


def train(
    method: str = typer.Argument(..., help="registered trainer, e.g. cpt"),
    config: Path = typer.Option(..., "--config", help="trainer YAML (see configs/trainers/)"),
    store: Optional[Path] = typer.Option(None, "--store", help="results store (overrides the config's store)"),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", help="checkpoint directory (overrides the config)"),
    max_steps: Optional[int] = typer.Option(None, help="override the config's max_steps"),
    fresh: bool = typer.Option(False, help="discard this run's checkpoints and losses and start over"),
    stage: Optional[str] = typer.Option(None, help="staged trainers (hqa_sft): train the stages up to and including NAME"),
    plan: bool = typer.Option(False, "--plan", help="print the per-GPU memory plan and the smallest cluster it fits; "
                              "train nothing"),
    gpu_gib: float = typer.Option(80.0, "--gpu-gib", min=1, help="--plan: memory of one GPU in GiB"),
):
    """Train a model; writes an HF checkpoint that `ctxbench score --model DIR` scores, and logs losses to the store."""
    from ctxbench.harness.core import registry
    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.harness.core.extras import require_extra
    from ctxbench.trainers.base import load_config
    from ctxbench.trainers.distributed import outlive_rank0

    cls = registry.get("trainer", method, field="METHOD")
    require_extra("train", for_=f"ctxbench train {method}")
    staged = getattr(cls, "staged", False)
    if stage is not None and not staged:
        raise ConfigError(f"--stage: trainer {method!r} has no stages; drop --stage")
    cfg = load_config(cls.config_cls, config, store=str(store) if store else None,
                      output_dir=str(output_dir) if output_dir else None, max_steps=max_steps)
    if plan:  # from the config alone: no data is made, nothing is written
        from ctxbench.trainers.memory_plan import render

        planner = cls(cfg, console=err, stage=stage) if staged else cls(cfg, console=err)
        for line in render(planner.plan_workloads(), gpu_gib):
            out.print(line, soft_wrap=True, highlight=False, markup=False)
        return
    writable_dir(Path(cfg.store), "--store" if store else "store")
    if cfg.output_dir:
        writable_dir(Path(cfg.output_dir), "--output-dir" if output_dir else "output_dir")
    trainer = cls(cfg, console=err, stage=stage) if staged else cls(cfg, console=err)
    try:
        result = trainer.train(fresh=fresh)
    except ConfigError:
        if trainer.is_main or not outlive_rank0():
            raise
        raise typer.Exit(2) from None  # under a launcher every rank refuses alike; rank 0 says the one line
    if not trainer.is_main:  # the other ranks trained the same model; rank 0 says what was done
        return
    for earlier in getattr(trainer, "results", [])[:-1]:
        state = "already trained" if earlier.skipped else f"trained {earlier.steps} steps"
        out.print(f"stage checkpoint ({state}): {earlier.checkpoint}", soft_wrap=True, highlight=False)
    if result.skipped:
        out.print(f"already trained (same config and data): {result.checkpoint}")
    else:
        resumed = f", resumed from step {result.resumed_from_step}" if result.resumed_from_step else ""
        out.print(f"trained {result.steps} steps, {result.tokens:,} tokens in {result.seconds:.0f}s{resumed}")
    losses = " ".join(f"{k} {v:.4f}" for k, v in (("train loss", result.train_loss), ("val loss", result.eval_loss)) if v is not None)
    if losses:
        out.print(losses)
    out.print(f"checkpoint: {result.checkpoint}")
    out.print(f"losses: {result.run_dir / 'losses.jsonl'}")
    out.print(f"score it: {score_command(Path(result.checkpoint), getattr(cfg, 'label', None))}",
              soft_wrap=True, highlight=False, markup=False)


HINT_SUITE = "ruler-quick"
# RULER tasks that need no data files and fit a short context: the hint runs as printed on a fresh machine
SHORT_TASKS = "ruler/niah_single_1,ruler/niah_multikey_2,ruler/niah_multikey_3"


def score_command(checkpoint: Path, label: str | None) -> str:
    """A score command that fits the checkpoint: the quick suite if its context holds the suite's lengths, else
    the short needle tasks at the checkpoint's own context (cpt-tiny: 512 tokens)."""
    import json
    import shlex

    from ctxbench.harness.core.config import load_suite

    command = f"ctxbench score --model {shlex.quote(str(checkpoint))} --suite {HINT_SUITE}"
    try:
        context = int(json.loads((checkpoint / "config.json").read_text()).get("max_position_embeddings") or 0)
    except (OSError, ValueError):
        context = 0
    if context and context < max(load_suite(HINT_SUITE).lengths):
        command += f" --tasks {SHORT_TASKS} --lengths {context}"
    return command + (f" --label {shlex.quote(label)}" if label else "")


def register(app: typer.Typer) -> None:
    app.command("train")(train)
