"""LOGO's rewards under ring attention (`sequence_parallel: {ring: N}`): r(y), the mean log-prob of each response's
labelled tokens, when each process of the ring holds a shard of every response.

transformers cuts `input_ids`, `position_ids` and the pre-shifted `shift_labels` along the sequence (torch's
head-and-tail layout), so a process sees some of each response's answer tokens. Each sums the log-probs and counts
the tokens of its shard per row; one all-reduce over the ring's group gives every process the whole responses' sums,
hence the same r(y) and the same loss as one process. The all-reduce is autograd's (`torch.distributed.nn`): its
backward sums the gradient over the ring, so each process's shard gets N times its share, and FSDP2's average over
the N processes leaves exactly the one-process gradient. The head runs inside the model's forward (`logits_to_keep`
as the positions some row labels): FSDP2 groups it with the final norm, and a head called after the forward would
have that group's weights freed before the norm's backward.
"""

from __future__ import annotations

from typing import Any

IGNORE = -100


def check_logo_layout(sp: Any, loss_chunk_tokens: int) -> None:
    """Ulysses would cut each response's log-probs with no sum over the shards: refused; a ring's rewards sum over it."""
    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.trainers.context_parallel import check_ring_loss

    if sp.ulysses > 1:
        raise ConfigError(f"sequence_parallel: trainer logo has no Ulysses sequence parallelism (its rewards sum each "
                          f"response over the shards of a ring only); set sequence_parallel: {{ring: {sp.ulysses}}} or 1")
    check_ring_loss(sp, loss_chunk_tokens)


def ring_response_rewards(model: Any, batch: dict[str, Any], group: int, ring_group: Any) -> tuple[Any, Any, Any]:
    """r(y) of every response (chosen [B], rejected [B, M]) over the whole sequences, and this shard's model output."""
    import torch.distributed as dist
    from torch.distributed.nn.functional import all_reduce

    targets = batch["shift_labels"]  # each position's next token (transformers shifts before it cuts)
    where = (targets != IGNORE).any(dim=0).nonzero().squeeze(1)
    out = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"),
                position_ids=batch["position_ids"], use_cache=False, logits_to_keep=where)
    logits = out.logits.float()
    picked = targets[:, where]
    mask = picked != IGNORE
    token_logps = logits.gather(2, picked.clamp(min=0).unsqueeze(-1)).squeeze(-1) - logits.logsumexp(dim=-1)
    sums = all_reduce((token_logps * mask).sum(-1), group=ring_group)
    counts = mask.sum(-1).to(sums.dtype)
    dist.all_reduce(counts, group=ring_group)
    r = (sums / counts.clamp(min=1)).view(-1, group)
    return r[:, 0], r[:, 1:], out


def ring_group_of(trainer: Any) -> Any:
    """The process group of the ring this process belongs to (accelerate's `cp` mesh dimension)."""
    return trainer.accelerator.torch_device_mesh["cp"].get_group()
