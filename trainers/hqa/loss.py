"""hqa_sft's answer-only loss and its batches: the mean cross-entropy over the answer tokens of the whole (accumulated,
all-process) batch, logits computed at those positions only; exact also when sequence parallelism cuts each
conversation into shards."""

from __future__ import annotations

from typing import Any

import numpy as np

from ctxbench.trainers.hqa.chat import IGNORE


def answer_loss_sum(model, input_ids, attention_mask=None, labels=None, position_ids=None, shift_labels=None,
                    chunk_tokens: int = 0):
    """(sum of next-token cross-entropy over labelled positions, their count): CPT's loss sum
    (trainers/chunked_loss.py `lm_loss_sum`: logits only there, `chunk_tokens` at a time when set, the head inside the
    forward, which FSDP2 under ring attention needs), in hqa's argument order. `shift_labels` (a sequence-parallel
    shard: the labels were shifted before the sequence was cut) are already each position's next token."""
    from ctxbench.trainers.chunked_loss import lm_loss_sum

    return lm_loss_sum(model, input_ids, labels, chunk_tokens=chunk_tokens, attention_mask=attention_mask,
                       position_ids=position_ids, shift_labels=shift_labels)


def answer_only_trainer_class(chunk_tokens: int = 0):
    from transformers import Trainer

    from ctxbench.trainers.chunked_loss import global_mean

    class AnswerOnlyTrainer(Trainer):
        """The mean over the global batch's answer tokens: each micro-batch's sum is divided by num_items_in_batch,
        the labelled-token count of the whole accumulated batch (over all devices) that the Trainer computes."""

        _scaled = False
        answer_tokens = 0

        @property
        def loss_is_scaled_for_ga(self):
            return self._scaled

        def _get_num_items_in_batch(self, batch_samples, device):
            """Under sequence parallelism the batches hold shards with pre-shifted labels: the step's answer tokens
            are their sum over every process (each shard once)."""
            if not (batch_samples and "shift_labels" in batch_samples[0]):
                return super()._get_num_items_in_batch(batch_samples, device)
            import torch

            mine = sum(int((b["shift_labels"] != IGNORE).sum()) for b in batch_samples)
            return self.accelerator.reduce(torch.tensor(mine, device=device), reduction="sum")

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            keys = ("input_ids", "attention_mask", "labels", "position_ids", "shift_labels")
            total, n = answer_loss_sum(model, **{k: inputs[k] for k in keys if k in inputs}, chunk_tokens=chunk_tokens)
            if model.training:
                self.answer_tokens += int(n)
            loss = global_mean(self, total, n, num_items_in_batch, inputs)
            return (loss, {}) if return_outputs else loss  # no logits: evaluation reads the loss (None is sliced)

    return AnswerOnlyTrainer


def pad_collator(pad_id: int, length: int | None = None):
    """Right-pads to the longest conversation, or to `length` (sequence parallelism: DeepSpeed-Ulysses gathers every
    process's batch, which gloo allows only at one shape, and cuts it into equal shards); padding has no label, and
    under causal attention changes no earlier position. position_ids are explicit: a shard keeps its global ones."""

    def collate(rows: list[dict[str, np.ndarray]]) -> dict[str, Any]:
        import torch

        width = length or max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[i, :n] = torch.from_numpy(r["input_ids"].astype(np.int64))
            labels[i, :n] = torch.from_numpy(r["labels"].astype(np.int64))
            mask[i, :n] = 1
        positions = torch.arange(width).expand_as(ids).clone()
        return {"input_ids": ids, "labels": labels, "attention_mask": mask, "position_ids": positions}

    return collate
