"""The memory plan's margin: what a GPU's measured peak adds to the plan's four parts, calibrated and per switch.

Calibrated on the GPU tier's four peaks (one H100, bf16, SDPA, activation checkpointing, no DeepSpeed, a SmolLM2-135M
shape; docs/training-at-scale.md): the plan under-counted them by 1.0-1.9 GiB (13-35%). What it leaves out is the
allocator's blocks and the transients of the loss (the logits' fp32 copies and gradients overlap in backward) and
of the optimizer step (torch's AdamW works on fp32 temporaries the size of a parameter group). The margin:

    0.75 GiB + 15% of the logits + 5% of the other activations + 4 B per parameter this GPU updates

lies above all four (1.05, 1.65, 2.42 and 2.42 GiB against 1.0, 1.1, 1.4 and 1.9 measured). A switch those runs did not
use adds 10% of the part it changes, until a GPU run measures it. Pure functions of a Plan (trainers/memory_plan.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GIB = 1024**3
FIXED = 0.75 * GIB  # allocator blocks, cuBLAS workspace: the smallest run (LOGO, 3.0 GiB planned) was 1.0 GiB over
LOGITS = 0.15  # the loss's overlapping fp32 copies and gradients, beyond the plan's 10 B per position and entry
OTHER_ACTIVATIONS = 0.05
OPTIMIZER_STEP = 4.0  # bytes per parameter this GPU updates: AdamW's fp32 temporaries
UNMEASURED = 0.10  # of the part a switch changes, for a switch no GPU run has measured


@dataclass(frozen=True)
class Margin:
    calibrated: float
    switches: tuple[tuple[str, float, str], ...]  # (switch as configured, bytes added, why)

    @property
    def total(self) -> float:
        return self.calibrated + sum(b for _, b, _ in self.switches)


def margin_of(plan: Any) -> Margin:
    """The margin of a memory_plan.Plan: the calibrated part and each switch's share, all stated."""
    w = plan.workload
    updated_here = 0 if w.offload else w.trainable / (plan.gpus if w.zero >= 1 else 1)
    other = plan.activations - plan.logits
    calibrated = FIXED + LOGITS * plan.logits + OTHER_ACTIVATIONS * other + OPTIMIZER_STEP * updated_here
    states = plan.weights + plan.gradients + plan.optimizer
    unmeasured = "not measured on a GPU yet: 10% of"
    switches = [
        ("activation checkpointing " + ("on" if w.checkpointing else "off"), 0.0 if w.checkpointing else UNMEASURED * other,
         "in the calibration" if w.checkpointing else f"{unmeasured} the activations"),
        (f"loss in chunks of {w.loss_chunk_tokens:,}" if w.loss_chunk_tokens else "loss unchunked", 0.0,
         "measured on an H100: 64K 38.7 -> 5.1 GiB" if w.loss_chunk_tokens else "in the calibration"),
    ]
    if w.tiled_mlp:
        switches.append((f"tiled MLP in {w.tiled_mlp} tiles", UNMEASURED * other, f"{unmeasured} the activations"))
    if w.activation_offload:
        switches.append(("activation offload", UNMEASURED * plan.offloaded, f"{unmeasured} what is offloaded"))
    if w.sequence_parallel > 1:
        kind = f"ring {w.ring}" if w.ring > 1 else f"Ulysses {w.sequence_parallel}"
        switches.append((f"sequence parallel ({kind})", UNMEASURED * other, f"{unmeasured} the activations"))
    if w.zero:
        switches.append((f"ZeRO-{w.zero}", UNMEASURED * states, f"{unmeasured} the model states"))
    return Margin(calibrated, tuple(switches))


def margin_lines(plan: Any, gib: Any) -> list[str]:
    """The plan's margin lines: the bound the GPU tier checks (peak <= total + margin) and each switch's share."""
    m = margin_of(plan)
    lines = [f"  margin: +{gib(m.total)}, so a measured peak of at most {gib(plan.total + m.total)} per GPU "
             f"(calibrated {gib(m.calibrated)}: 0.75 GiB + 15% of the logits + 5% of the other activations + "
             f"4 B per parameter updated here, above the 4 H100 peaks it was fitted to)"]
    lines += [f"    {name}: +{gib(added)} ({why})" for name, added, why in m.switches]
    return lines
