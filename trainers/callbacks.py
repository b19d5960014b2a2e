"""What a training shows and logs while it runs: the loss log in the store and one rich progress bar.

Defined in a function: transformers loads only when a training starts. The bar has close(), which the loop calls
on Ctrl-C or SIGTERM too (no train-end event comes then), so the terminal's cursor is always given back.
"""

from __future__ import annotations

from typing import Any

from ctxbench.trainers.base import TrainRun


def training_callbacks(run: TrainRun, tokens_per_step: int, console: Any, name: str) -> list[Any]:
    """Loss logging to the store and a rich progress bar (defined here: transformers loads only when training)."""
    from transformers import TrainerCallback

    def tokens_at(state) -> int:
        return int(state.num_input_tokens_seen or state.global_step * tokens_per_step)

    class LossLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            rows = [{"step": state.global_step, "tokens": tokens_at(state),
                     "split": split, "loss": float(logs[key])}
                    for split, key in (("train", "loss"), ("eval", "eval_loss")) if key in logs]
            run.append(rows)

    class RichProgress(TrainerCallback):
        def __init__(self):
            self.bar = self.job = None

        def on_train_begin(self, args, state, control, **kwargs):
            if console is None or not state.is_world_process_zero:
                return
            from ctxbench.harness.core.progress import progress

            self.bar = progress(console)
            self.bar.start()
            self.job = self.bar.add_task(f"training {name}", total=state.max_steps, completed=state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.update(self.job, completed=state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            shown = " ".join(f"{k.replace('eval_', 'val ')} {logs[k]:.3f}" for k in ("loss", "eval_loss") if k in (logs or {}))
            if self.bar is not None and shown:
                self.bar.update(self.job, description=f"training {name} · {shown}")

        def on_train_end(self, args, state, control, **kwargs):
            self.close()

        def close(self) -> None:
            """Stop the bar (the terminal's cursor comes back); also on Ctrl-C or SIGTERM, where no train end comes."""
            if self.bar is not None:
                self.bar.stop()
                self.bar = None

    return [LossLog(), RichProgress()]
