"""`loss_chunk_tokens`: the LM head and cross-entropy in chunks give the unchunked loss and gradients (fp32, a tiny
random Llama), for cpt's causal-LM loss and hqa_sft's answer-only loss; the plan's logits term shrinks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

VOCAB = 97


def tiny_llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, attn_implementation="sdpa")
    return LlamaForCausalLM(cfg).float()


def loss_and_grads(model, fn):
    model.zero_grad()
    loss = fn()
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def full_logits_loss_sum(model, ids, labels):
    """The reference: the whole logits tensor, then the summed cross-entropy of the labelled next tokens."""
    logits = model(input_ids=ids, use_cache=False).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels[:, 1:].reshape(-1), reduction="sum",
                                             ignore_index=-100)


@pytest.mark.parametrize("chunk", [7, 16, 1000])
def test_chunked_lm_loss_and_gradients_equal_the_full_logits(chunk):
    from ctxbench.trainers.chunked_loss import lm_loss_sum

    model = tiny_llama()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (2, 48), generator=gen)
    labels = ids.clone()
    labels[0, 10:14] = -100
    ref, ref_grads = loss_and_grads(model, lambda: full_logits_loss_sum(model, ids, labels))
    got, grads = loss_and_grads(model, lambda: lm_loss_sum(model, ids, labels, chunk_tokens=chunk)[0])
    assert got.item() == pytest.approx(ref.item(), rel=1e-6)
    assert set(grads) == set(ref_grads)
    for name, g in ref_grads.items():
        assert torch.allclose(grads[name], g, rtol=1e-5, atol=1e-6), name


def test_chunked_answer_loss_equals_the_unchunked_one():
    from ctxbench.trainers.hqa.loss import answer_loss_sum

    model = tiny_llama(seed=3)
    ids = torch.randint(0, VOCAB, (2, 40), generator=torch.Generator().manual_seed(2))
    labels = torch.full_like(ids, -100)
    labels[:, 25:] = ids[:, 25:]  # the answer: the last 15 tokens of each row
    ref, ref_grads = loss_and_grads(model, lambda: answer_loss_sum(model, ids, labels=labels)[0])
    got, grads = loss_and_grads(model, lambda: answer_loss_sum(model, ids, labels=labels, chunk_tokens=4)[0])
    assert got.item() == pytest.approx(ref.item(), rel=1e-6)
    for name, g in ref_grads.items():
        assert torch.allclose(grads[name], g, rtol=1e-5, atol=1e-6), name


def test_the_chunks_logits_are_not_kept_for_backward():
    """Under the chunked loss the tensors saved for backward hold no [positions, vocab] logits."""
    from ctxbench.trainers.chunked_loss import head_ce_sum

    head = torch.nn.Linear(32, 5000, bias=False)
    hidden = torch.randn(256, 32, requires_grad=True)
    targets = torch.randint(0, 5000, (256,))
    saved: list[int] = []

    def pack(t):
        saved.append(t.numel())
        return t

    for chunk, bound in ((0, None), (32, 32 * 5000)):
        saved.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            head_ce_sum(head, hidden, targets, chunk)
        largest = max(saved)
        if bound is None:
            assert largest >= 256 * 5000  # unchunked: the whole logits are kept
        else:
            assert largest < bound  # chunked: at most the chunk's inputs (its logits are recomputed in backward)


def test_the_plan_sizes_one_chunk_of_logits():
    from ctxbench.trainers.memory_plan import KNOWN, Workload, per_gpu, render

    shape = next(iter(KNOWN.values()))
    full = Workload("w", shape, 65536, 1, shape.params(), 1.0)
    chunked = Workload("w", shape, 65536, 1, shape.params(), 1.0, loss_chunk_tokens=4096)
    saved = per_gpu(full, 1).activations - per_gpu(chunked, 1).activations
    assert saved == pytest.approx((65536 - 4096) * shape.vocab * 10.0)
    assert "loss in chunks of 4,096 tokens" in render([chunked], 80)[0]
    assert "chunks" not in render([full], 80)[0]


def one_step(trainer_cls, rows, collate, tmp_path, grad_accum=2):
    """One optimizer step over `rows` (micro-batches of one); the logged loss and the weights after it."""
    from transformers import TrainingArguments

    model = tiny_llama(seed=5)
    # SGD: the weights move by the gradient itself (Adam's first step is about its sign, which rounding flips where a
    # gradient is near 0)
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=1, learning_rate=1e-1,
                             optim="sgd",
                             gradient_accumulation_steps=grad_accum, logging_steps=1, report_to=[], disable_tqdm=True,
                             save_strategy="no", remove_unused_columns=False, use_cpu=True, seed=0, data_seed=0,
                             lr_scheduler_type="constant", max_grad_norm=0.0)
    hf = trainer_cls(model=model, args=args, train_dataset=rows, data_collator=collate)
    hf.train()
    loss = [h["loss"] for h in hf.state.log_history if "loss" in h][0]
    return loss, {n: p.detach().clone() for n, p in model.named_parameters()}


def check_same_step(a, b):
    assert a[0] == pytest.approx(b[0], rel=1e-5)
    for name, w in a[1].items():
        assert torch.allclose(b[1][name], w, rtol=1e-5, atol=1e-6), name


def test_cpts_chunked_trainer_takes_the_unchunked_step(tmp_path):
    """Gradient accumulation over rows of unequal labelled counts: the step equals transformers' own loss."""
    import numpy as np
    from transformers import Trainer

    from ctxbench.trainers.chunked_loss import packed_lm_trainer_class
    from ctxbench.trainers.cpt import collate_packed

    rng = np.random.default_rng(0)
    rows = [{"input_ids": rng.integers(0, VOCAB, 32)} for _ in range(2)]
    ref = one_step(Trainer, rows, collate_packed, tmp_path / "ref")
    check_same_step(ref, one_step(packed_lm_trainer_class(8, False), rows, collate_packed, tmp_path / "chunked"))


def test_hqa_sfts_chunked_trainer_takes_the_unchunked_step(tmp_path):
    import numpy as np

    from ctxbench.trainers.hqa.loss import answer_only_trainer_class, pad_collator

    rng = np.random.default_rng(1)
    rows = []
    for n, answer in ((30, 6), (22, 11)):
        ids = rng.integers(3, VOCAB, n)
        rows.append({"input_ids": ids, "labels": np.where(np.arange(n) >= n - answer, ids, -100)})
    ref = one_step(answer_only_trainer_class(), rows, pad_collator(0), tmp_path / "ref")
    check_same_step(ref, one_step(answer_only_trainer_class(4), rows, pad_collator(0), tmp_path / "chunked"))


def test_logos_chunked_rewards_and_gradients_equal_the_unchunked_ones():
    from ctxbench.trainers.logo.loss import logo_loss
    from ctxbench.trainers.logo.trainer import response_rewards

    model = tiny_llama(seed=7)
    ids = torch.randint(3, VOCAB, (6, 36), generator=torch.Generator().manual_seed(4))  # 2 samples x (1 + 2) responses
    labels = torch.full_like(ids, -100)
    for row, start in enumerate((20, 25, 28, 22, 30, 18)):  # replies of unequal lengths
        labels[row, start:] = ids[row, start:]
    batch = {"input_ids": ids, "labels": labels, "attention_mask": torch.ones_like(ids),
             "position_ids": torch.arange(36).expand_as(ids)}

    def loss(chunk):
        chosen, rejected, _ = response_rewards(model, batch, 3, chunk)
        return logo_loss(chosen, rejected, beta=10.0, gamma=3.0, sft_weight=0.1).loss

    ref, ref_grads = loss_and_grads(model, lambda: loss(0))
    got, grads = loss_and_grads(model, lambda: loss(5))
    # 1e-5, not 1e-6: the head over the gathered answer rows rounds differently from the head over the kept window
    # (a single chunk differs as much), and beta = 10 scales the rewards into the loss
    assert got.item() == pytest.approx(ref.item(), rel=1e-5)
    for name, g in ref_grads.items():
        assert torch.allclose(grads[name], g, rtol=1e-4, atol=1e-6), name


@pytest.mark.slow  # ~10 s: two LOGO trainings; the chunked rewards themselves are checked above in the default tier
def test_logo_trains_with_lora_and_the_chunked_loss_as_without(tmp_path, logo_data):
    """Through the trainer (LoRA, evaluation included): the same losses with the head applied in chunks."""
    from ctxbench.trainers.base import TrainRun
    from ctxbench.trainers.logo.trainer import LogoConfig, LogoTrainer

    def losses(chunk: int) -> list[float]:
        cfg = LogoConfig(base_model={"config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                                "num_attention_heads": 2, "num_key_value_heads": 1,
                                                "max_position_embeddings": 4096}},
                         store=str(tmp_path / f"runs{chunk}"), max_steps=2, per_device_batch_size=1, save_steps=2,
                         eval_steps=2, threads=1, seed=0, learning_rate=1e-3, loss_chunk_tokens=chunk,
                         data={"path": str(logo_data), "eval_samples": 2}, lora={"r": 4, "alpha": 8})
        result = LogoTrainer(cfg).train()
        return [r["loss"] for r in TrainRun(tmp_path / f"runs{chunk}", result.run_id).losses()]

    unchunked = losses(0)
    assert len(unchunked) == 3 and losses(64) == pytest.approx(unchunked, rel=1e-4)
