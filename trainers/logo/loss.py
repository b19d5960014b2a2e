"""The LOGO objective (Eq. 2-3), in plain torch so it can be checked against a hand computation.

r(y) = mean over y's tokens of log π(y_t | x, y_<t)  (SimPO's length-normalised reward, without β)
L    = -log σ(β·r(y_w) - (β/M)·Σ_j r(y_l^j) - γ) + λ·NLL(y_w),  NLL(y_w) = -r(y_w) (mean token NLL)
and the batch loss is the mean over samples. Eq. 3 prints +λ·log π(y_w|x), a sign slip: the SFT term
is a negative log-likelihood. With M = 1 this is SimPO plus CPO's NLL term (TRL's CPOTrainer with
loss_type="simpo", cpo_alpha=λ). The authors' code is not followed where it is wrong: its rejected
log-probs come from overlapping slices ([B:2B] and [B:], so the loss mixes rejected #1 alone with a
mean, and batches above 1 fail), its cross-entropy is unshifted beside shifted log-probs, and it scores
only positions where the responses' labels differ, which drops a shared answer prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads only when training (the registry imports every trainer module)
    import torch


def response_logps(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean log-prob of the labelled tokens, their count) per row; logits[t] predicts labels[t + 1]; -100 is ignored."""
    import torch

    logits = logits[:, :-1, :]
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()  # half-precision logits: log-softmax in float32
    target = labels[:, 1:]
    mask = target != -100
    picked = torch.gather(logits, 2, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    logp = (picked - torch.logsumexp(logits, dim=-1)) * mask
    count = mask.sum(-1)
    return logp.sum(-1) / count.clamp(min=1), count


@dataclass(frozen=True)
class LogoLoss:
    loss: torch.Tensor  # scalar, differentiable
    chosen: torch.Tensor  # β·r(y_w) per sample (detached)
    rejected: torch.Tensor  # β·mean_j r(y_l^j) per sample (detached)
    sft: torch.Tensor  # NLL(y_w) per sample (detached)

    def metrics(self) -> dict[str, float]:
        margin = self.chosen - self.rejected
        return {"rewards/chosen": self.chosen.mean().item(), "rewards/rejected": self.rejected.mean().item(),
                "rewards/margin": margin.mean().item(), "rewards/accuracy": (margin > 0).float().mean().item(),
                "sft_loss": self.sft.mean().item()}


def logo_loss(chosen: torch.Tensor, rejected: torch.Tensor, *, beta: float, gamma: float, sft_weight: float,
              preference: bool = True) -> LogoLoss:
    """chosen: r(y_w) per sample [B]; rejected: r(y_l^j) [B, M]. preference=False keeps only λ·NLL (the SFT baseline)."""
    import torch.nn.functional as F

    r_l = rejected.mean(dim=1)
    nll = -chosen
    per_sample = sft_weight * nll
    if preference:
        per_sample = per_sample - F.logsigmoid(beta * chosen - beta * r_l - gamma)
    return LogoLoss(per_sample.mean(), (beta * chosen).detach(), (beta * r_l).detach(), nll.detach())
