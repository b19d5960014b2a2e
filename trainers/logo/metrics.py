"""LOGO's metrics log: the logged rewards (chosen, rejected, margin, accuracy) and SFT loss of every step, appended to
<run>/metrics.jsonl by rank 0, for reward-margin curves."""

from __future__ import annotations

from typing import Any

from ctxbench.harness.core.io import append_jsonl

METRICS = "metrics.jsonl"


def metrics_callback(trainer: Any) -> Any:
    """Append the logged rewards and SFT loss to <run>/metrics.jsonl (rank 0), for reward-margin curves."""
    from transformers import TrainerCallback

    class MetricsLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            row = {k: float(v) for k, v in logs.items() if "rewards/" in k or "sft_loss" in k}
            if row:
                split = "eval" if any(k.startswith("eval_") for k in row) else "train"
                row = {k.removeprefix("eval_"): v for k, v in row.items()}
                append_jsonl(trainer.run.dir / METRICS, [{"step": state.global_step, "split": split, **row}])

    return MetricsLog()
