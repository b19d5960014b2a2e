"""The LOGO objective (Eq. 2-3): a numpy hand computation, TRL's SimPO at M = 1, and what a gradient step does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctxbench.trainers.logo.loss import logo_loss, response_logps

BETA, GAMMA, LAM = 10.0, 3.0, 0.1


def toy_batch(seed: int = 0, lengths=(3, 2, 4), prompt: int = 5, vocab: int = 11):
    """One sample: chosen + 2 rejected replies of the given lengths after a shared prompt, right-padded, float64 logits.
    The replies share their first token (a shared answer prefix must still count)."""
    rng = np.random.default_rng(seed)
    width = prompt + max(lengths) + 1
    labels = np.full((len(lengths), width), -100, dtype=np.int64)
    first = rng.integers(vocab)
    for i, n in enumerate(lengths):
        labels[i, prompt:prompt + n] = np.concatenate([[first], rng.integers(0, vocab, n - 1)])
    return rng.normal(size=(len(lengths), width, vocab)) * 3, labels


def numpy_loss(logits: np.ndarray, labels: np.ndarray, *, beta: float, gamma: float, lam: float) -> float:
    """The paper's formula written out: token t is predicted by the logits at t - 1."""
    r = []
    for row_logits, row_labels in zip(logits, labels):
        terms = []
        for t in range(1, len(row_labels)):
            if row_labels[t] != -100:
                z = row_logits[t - 1]
                terms.append(z[row_labels[t]] - (np.log(np.sum(np.exp(z - z.max()))) + z.max()))
        r.append(np.mean(terms))
    r_w, r_l = r[0], np.mean(r[1:])
    margin = beta * r_w - beta * r_l - gamma
    return float(np.log1p(np.exp(-margin)) + lam * (-r_w))


def torch_loss(logits: np.ndarray, labels: np.ndarray, **kw):
    r, counts = response_logps(torch.from_numpy(logits), torch.from_numpy(labels))
    r = r.view(-1, len(labels))
    return logo_loss(r[:, 0], r[:, 1:], **kw), counts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_equals_a_numpy_hand_computation(seed):
    logits, labels = toy_batch(seed)
    got, counts = torch_loss(logits, labels, beta=BETA, gamma=GAMMA, sft_weight=LAM)
    assert counts.tolist() == [3, 2, 4]  # every answer token counts, the shared first one too
    assert abs(got.loss.item() - numpy_loss(logits, labels, beta=BETA, gamma=GAMMA, lam=LAM)) < 1e-6


def test_batch_loss_is_the_mean_over_samples():
    """Each sample's rejected replies are its own (the authors' [B:] slice mixes samples and fails above batch 1)."""
    (l0, y0), (l1, y1) = toy_batch(3), toy_batch(4)
    both = np.concatenate([l0, l1]), np.concatenate([y0, y1])
    r, _ = response_logps(torch.from_numpy(both[0]), torch.from_numpy(both[1]))
    r = r.view(2, 3)
    got = logo_loss(r[:, 0], r[:, 1:], beta=BETA, gamma=GAMMA, sft_weight=LAM).loss.item()
    want = np.mean([numpy_loss(l0, y0, beta=BETA, gamma=GAMMA, lam=LAM), numpy_loss(l1, y1, beta=BETA, gamma=GAMMA, lam=LAM)])
    assert abs(got - want) < 1e-6


def test_sft_objective_keeps_only_lambda_nll():
    logits, labels = toy_batch(5)
    got, _ = torch_loss(logits, labels, beta=BETA, gamma=GAMMA, sft_weight=LAM, preference=False)
    no_pref = numpy_loss(logits, labels, beta=BETA, gamma=GAMMA, lam=LAM) - numpy_loss(logits, labels, beta=BETA, gamma=GAMMA, lam=0)
    assert abs(got.loss.item() - no_pref) < 1e-6 and got.sft.item() > 0


def test_m1_equals_trl_cpo_simpo():
    """With one rejected reply LOGO is SimPO + λ·NLL: TRL's CPOTrainer(loss_type="simpo", simpo_gamma=γ, cpo_alpha=λ)."""
    import warnings

    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    from ctxbench.harness.core.models import load_tokenizer
    from ctxbench.trainers.logo.trainer import response_rewards

    torch.set_num_threads(1)
    tok = load_tokenizer("smollm2-135m")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=1, vocab_size=len(tok)))
    ds = Dataset.from_dict({"prompt": ["The capital of France is", "Water boils at"],
                            "chosen": [" Paris.", " 100 degrees Celsius at sea level."],
                            "rejected": [" Rome, in Italy.", " cold."]})
    args = CPOConfig(output_dir="unused", loss_type="simpo", simpo_gamma=GAMMA, cpo_alpha=LAM, beta=BETA, report_to=[],
                     per_device_train_batch_size=1, use_cpu=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trl = CPOTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    model.eval()
    for row in range(2):
        batch = trl.data_collator([trl.train_dataset[row]])
        with torch.no_grad():
            want, metrics = trl.get_batch_loss_metrics(model, batch, train_eval="eval")
            cat = trl.concatenated_inputs(batch, is_encoder_decoder=False, padding_value=trl.pad_token_id, device="cpu")
            mask = cat["concatenated_attention_mask"]
            ours = {"input_ids": cat["concatenated_input_ids"], "attention_mask": mask, "labels": cat["concatenated_labels"],
                    "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}
            chosen, rejected, _ = response_rewards(model, ours, group=2)
            got = logo_loss(chosen, rejected, beta=BETA, gamma=GAMMA, sft_weight=LAM)
        assert got.loss.item() == pytest.approx(want.item(), rel=1e-5, abs=1e-6)
        assert got.metrics()["rewards/margin"] == pytest.approx(metrics["eval_rewards/margins"], rel=1e-5, abs=1e-5)


def test_an_sgd_step_raises_the_chosen_reward_and_lowers_the_rejected():
    from transformers import LlamaConfig, LlamaForCausalLM

    from ctxbench.trainers.logo.trainer import response_rewards

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=1, vocab_size=50))
    gen = torch.Generator().manual_seed(1)
    width, prompt = 14, 8
    ids = torch.randint(0, 50, (3, width), generator=gen)
    ids[:, :prompt] = ids[0, :prompt]  # one shared prompt
    labels = ids.clone()
    labels[:, :prompt] = -100
    labels[1, 12:] = -100  # replies of 6, 4 and 6 tokens
    batch = {"input_ids": ids, "labels": labels, "attention_mask": (labels != -100) | (torch.arange(width) < prompt),
             "position_ids": torch.arange(width).expand(3, -1)}
    batch["attention_mask"] = batch["attention_mask"].long()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)  # a small step: first-order behaviour
    before_w, before_l, _ = response_rewards(model, batch, group=3)
    logo_loss(before_w, before_l, beta=BETA, gamma=GAMMA, sft_weight=LAM).loss.backward()
    opt.step()
    with torch.no_grad():
        after_w, after_l, _ = response_rewards(model, batch, group=3)
    assert after_w.item() > before_w.item()
    assert after_l.mean().item() < before_l.mean().item()
