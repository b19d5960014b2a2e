"""hqa_sft's answer-only loss under ring attention (FSDP2): the same sum as trainers/hqa/loss.py `answer_loss_sum`, with
the output head run inside the model's forward.

accelerate (1.15) puts the final norm, the embedding and the head in one FSDP2 unit. `answer_loss_sum` calls the head
after the forward, on the labelled positions' hidden states; FSDP then counts that unit's backward as done when the
head's gradient is in and frees the gathered norm weight before the norm's own backward reads it (a segfault on a
CPU). Here the model keeps the logits of the positions some row labels (`logits_to_keep` as indices), so the head runs
in the forward FSDP wraps, and only those logits are computed.
"""

from __future__ import annotations

from typing import Any

from ctxbench.trainers.hqa.chat import IGNORE


def answer_loss_sum_in_forward(model: Any, input_ids: Any, attention_mask: Any = None, labels: Any = None,
                               position_ids: Any = None, shift_labels: Any = None) -> tuple[Any, Any]:
    """(sum of next-token cross-entropy over labelled positions, their count); `shift_labels` (a context-parallel
    shard: transformers shifts the labels before it cuts the sequence) are already each position's next token."""
    import torch.nn.functional as F

    targets = shift_labels if shift_labels is not None else F.pad(labels[:, 1:], (0, 1), value=IGNORE)
    keep = targets != IGNORE
    where = keep.any(dim=0).nonzero().squeeze(1)  # positions some row labels; the others' logits are never made
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, logits_to_keep=where,
                use_cache=False)
    logits = out.logits.float()
    total = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[:, where].reshape(-1), ignore_index=IGNORE,
                            reduction="sum")
    return total, keep.sum()


def ring_trainer_class(answer_only: type) -> type:
    """hqa_sft's answer-only Trainer with the loss above (its token count and global mean unchanged)."""
    from ctxbench.trainers.chunked_loss import global_mean

    class RingAnswerOnlyTrainer(answer_only):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            keys = ("input_ids", "attention_mask", "labels", "position_ids", "shift_labels")
            total, n = answer_loss_sum_in_forward(model, **{k: inputs[k] for k in keys if k in inputs})
            if model.training:
                self.answer_tokens += int(n)
            loss = global_mean(self, total, n, num_items_in_batch, inputs)
            return (loss, {}) if return_outputs else loss  # no logits: evaluation reads the loss (None is sliced)

    return RingAnswerOnlyTrainer
