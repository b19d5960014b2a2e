"""Chunked LM-head cross-entropy (`loss_chunk_tokens`): the logits of a long sequence are never held whole.

The full logits tensor is tokens x vocabulary (64K tokens x 128K vocabulary in fp32 is 32 GiB, plus its gradient).
Here the head and the cross-entropy run over `chunk_tokens` positions at a time, each chunk under activation
checkpointing: the forward keeps only the chunk's loss, the backward recomputes that chunk's logits alone. The loss
is the same sum (to float rounding: the chunks are added in order), and so are the gradients.

Also the causal-LM trainer of packed sequences (cpt): the chunked loss, and the per-document attention of packings
made with `attention: per_document` (position ids restart per document; transformers then masks across documents).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

IGNORE = -100


def head_ce_sum(head: Any, hidden: Any, targets: Any, chunk_tokens: int = 0, softcap: float | None = None) -> Any:
    """Sum of cross-entropy of `head(hidden)` against targets ([N, H] and [N], no ignored entries), computing the
    logits `chunk_tokens` rows at a time (0: all at once)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    def piece(h, t):
        logits = head(h).float()
        if softcap:
            logits = logits.div(softcap).tanh().mul(softcap)
        return F.cross_entropy(logits, t, reduction="sum")

    n = hidden.shape[0]
    if chunk_tokens <= 0 or n <= chunk_tokens:
        return piece(hidden, targets)
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    for lo in range(0, n, chunk_tokens):
        h, t = hidden[lo:lo + chunk_tokens], targets[lo:lo + chunk_tokens]
        total = total + (checkpoint(piece, h, t, use_reentrant=False) if torch.is_grad_enabled() else piece(h, t))
    return total


def head_token_logps(head: Any, hidden: Any, targets: Any, chunk_tokens: int, softcap: float | None = None) -> Any:
    """log p(target) of each row of `head(hidden)` ([N, H], [N] -> [N]), the logits `chunk_tokens` rows at a time,
    each chunk recomputed in backward (LOGO's per-response rewards)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    def piece(h, t):
        logits = head(h).float()
        if softcap:
            logits = logits.div(softcap).tanh().mul(softcap)
        return logits.gather(1, t.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=-1)

    parts = [checkpoint(piece, hidden[lo:lo + chunk_tokens], targets[lo:lo + chunk_tokens], use_reentrant=False)
             if torch.is_grad_enabled() else piece(hidden[lo:lo + chunk_tokens], targets[lo:lo + chunk_tokens])
             for lo in range(0, hidden.shape[0], chunk_tokens)]
    return torch.cat(parts) if parts else hidden.new_zeros(0, dtype=torch.float32)


def row_mean_logps(model: Any, batch: dict[str, Any], chunk_tokens: int) -> tuple[Any, Any]:
    """(mean log-prob of each row's labelled next tokens, the model output), the head applied to the labelled positions
    in chunks (LOGO's rewards r(y) under loss_chunk_tokens)."""
    import torch

    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"],
                use_cache=False, logits_to_keep=1, output_hidden_states=True)
    targets = batch["labels"][:, 1:]
    keep = targets != IGNORE
    inner = getattr(model, "module", model)
    cap = getattr(inner.config, "final_logit_softcapping", None)
    logp = head_token_logps(inner.get_output_embeddings(), out.hidden_states[-1][:, :-1][keep], targets[keep], chunk_tokens,
                            cap)
    sums = torch.zeros(targets.shape[0], dtype=logp.dtype, device=logp.device).index_add(0, keep.nonzero()[:, 0], logp)
    return sums / keep.sum(-1).clamp(min=1), out


def lm_loss_sum(model: Any, input_ids: Any, labels: Any = None, *, chunk_tokens: int = 0, attention_mask: Any = None,
                position_ids: Any = None, shift_labels: Any = None) -> tuple[Any, Any]:
    """(sum of next-token cross-entropy over labelled positions, their count), the head applied in chunks.
    Through the model's own forward (under DDP the wrapper's, so gradients are averaged), keeping one logit; the head
    runs inside that forward (`loss_in_forward`), which FSDP2 needs under ring attention."""
    shifted = shift_labels is not None
    targets = shift_labels if shifted else labels[:, 1:]
    keep = targets != IGNORE

    def loss_of(inner: Any, out: Any) -> Any:
        hidden = out.hidden_states[-1] if shifted else out.hidden_states[-1][:, :-1]
        cap = getattr(inner.config, "final_logit_softcapping", None)
        return head_ce_sum(inner.get_output_embeddings(), hidden[keep], targets[keep], chunk_tokens, cap)

    with loss_in_forward(getattr(model, "module", model), loss_of):  # DistributedDataParallel wraps the model
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                    output_hidden_states=True, logits_to_keep=1, use_cache=False)
    return out["loss"], keep.sum()


@contextmanager
def loss_in_forward(inner: Any, loss_of: Any):
    """Computes `loss_of(inner, output)` as the output's `loss` inside `inner`'s forward call: a forward hook run
    before FSDP2's own post-forward hook. Under FSDP2 (ring attention) the final norm, the embedding and the head are
    one unit; a head run after the forward has its gradient counted as that unit's backward, which then frees the
    gathered norm weight before the norm's backward reads it (a segfault on a CPU). Inside, the loss is an output
    of the forward like the logits, and FSDP's backward hooks see it first."""

    def hook(module, args, kwargs, output):
        output["loss"] = loss_of(module, output)
        return output

    handle = inner.register_forward_hook(hook, with_kwargs=True, prepend=True)
    try:
        yield
    finally:
        handle.remove()


def model_inputs(inputs: dict[str, Any], per_document: bool) -> dict[str, Any]:
    """The batch as the model gets it: per-document attention drops the all-ones attention mask and the KV cache,
    since transformers builds the block-diagonal mask from restarting position ids only when neither is given (a
    forward without use_cache=False makes a cache, in training too, and then attends across documents)."""
    if not per_document:
        return dict(inputs)
    return {**{k: v for k, v in inputs.items() if k != "attention_mask"}, "use_cache": False}


def global_mean(trainer: Any, total: Any, n: Any, num_items_in_batch: Any, inputs: dict) -> Any:
    """A micro-batch's loss sum as its share of the step's mean: divided by the step's token count when transformers
    gives one (then DDP/ZeRO's averaging over processes is undone), else by this batch's own count. Sets the trainer's
    `_scaled`, which its `loss_is_scaled_for_ga` reports."""
    trainer._scaled = num_items_in_batch is not None
    if not trainer._scaled:
        return total / n.clamp(min=1)
    loss = total / num_items_in_batch
    if ("shift_labels" in inputs or trainer.args.average_tokens_across_devices) and trainer.accelerator.num_processes > 1:
        loss = loss * trainer.accelerator.num_processes  # DDP (and ZeRO) average gradients over processes
    return loss


def packed_lm_trainer_class(chunk_tokens: int, per_document: bool) -> type:
    """A transformers Trainer for packed causal-LM batches: the loss in chunks (chunk_tokens > 0), and per-document
    attention (the all-ones attention mask dropped, so transformers builds the block-diagonal mask from the restarting
    position ids; the mask is in the batch only so that token accounting counts every token)."""
    from transformers import Trainer

    class PackedLMTrainer(Trainer):
        _scaled = False

        @property
        def loss_is_scaled_for_ga(self):
            return self._scaled

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            inputs = model_inputs(inputs, per_document)
            if not chunk_tokens:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            keys = ("input_ids", "labels", "attention_mask", "position_ids", "shift_labels")
            total, n = lm_loss_sum(model, chunk_tokens=chunk_tokens, **{k: inputs[k] for k in keys if k in inputs})
            loss = global_mean(self, total, n, num_items_in_batch, inputs)
            return (loss, {}) if return_outputs else loss  # no logits to return: evaluation reads the loss only

    return PackedLMTrainer
