"""Batched decode on CPU (harness/backends/hf_batched.py): prompts prefilled alone, decoded together from merged caches.

Greedy answers of the real SmolLM2-135M (fp32) equal one-at-a-time decoding, or differ only where the top two logits
tie; the switch `batched_decode: false` restores the one-at-a-time path.
"""

from __future__ import annotations

import pytest

from ctxbench.harness.backends.hf_batched import decode_groups
from ctxbench.harness.core.types import Request

pytestmark = pytest.mark.integration

PROMPTS = ["The capital of France is",
           "Once upon a time, in a land far away, there lived a",
           "1, 2, 3, 4,",
           "Q: What colour is the sky on a clear day?\nA:",
           "Water boils at a temperature of"]
NEW_TOKENS = 4  # the first token from the merged prefill, then three decode steps on the merged, left-padded cache
TIE = 1e-3  # top-2 logits closer than this are a tie that float rounding may break either way


@pytest.fixture()
def smol(smol_hf):
    """SmolLM2 (cpu, float32, one thread), loaded once per test process (tests/conftest.py) and reset for each test."""
    return smol_hf


def test_cpu_default_is_batched_decode_of_eight(smol):
    from ctxbench.harness.backends.args import HFArgs

    assert HFArgs().batched_decode is True and HFArgs(batched_decode=False).batched_decode is False
    assert (smol.batch_size, smol.batched_decode, smol.info()["batching"]) == (8, True, "prefill-alone")


def greedy(backend, ids_list: list[list[int]], batched: bool):
    """(generated ids per prompt, the scores of each step per prompt) from generate(), batched or one at a time."""
    torch = backend._torch
    backend.batched_decode, backend.prefix_reuse = batched, False  # one at a time: generate() prefills the prompt
    groups = [ids_list] if batched else [[ids] for ids in ids_list]
    tokens, scores = [], []
    for group in groups:
        inputs, *_ = backend._inputs(group)
        with torch.inference_mode():
            out = backend.model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, temperature=None,
                                         top_p=None, top_k=None, pad_token_id=backend.tokenizer.pad_token_id,
                                         output_scores=True, return_dict_in_generate=True)
        width = inputs["input_ids"].shape[1]
        tokens += out.sequences[:, width:].tolist()
        scores += [[step[row] for step in out.scores] for row in range(len(group))]
    return tokens, scores


def test_greedy_batched_equals_one_at_a_time_except_ties(smol):
    ids_list = [smol.tokenizer(p)["input_ids"] for p in PROMPTS]
    assert len({len(ids) for ids in ids_list}) == len(ids_list)  # every row padded differently
    alone, alone_scores = greedy(smol, ids_list, batched=False)
    together, together_scores = greedy(smol, ids_list, batched=True)
    for a, b, sa, sb in zip(alone, together, alone_scores, together_scores):
        if a == b:
            assert max(float((x - y).abs().max()) for x, y in zip(sa, sb)) < 1e-2  # the same logits, up to rounding
            continue
        step = next(j for j, (x, y) in enumerate(zip(a, b)) if x != y)
        top2 = sa[step].float().topk(2).values
        assert float(top2[0] - top2[1]) < TIE, f"not a tie at step {step}: {a} vs {b}"


def test_backend_answers_and_timing_match_the_switch_off(smol):
    reqs = [Request(f"s#{i}", p, max_new_tokens=NEW_TOKENS) for i, p in enumerate(PROMPTS)]
    smol.batched_decode, smol.batch_size = False, 1
    alone = smol.generate(reqs)
    smol.batched_decode, smol.batch_size = True, 8
    together = smol.generate(reqs)
    assert [p.sample_id for p in together] == [r.sample_id for r in reqs]
    assert [p.text for p in together] == [p.text for p in alone]
    assert [p.generated_tokens for p in together] == [p.generated_tokens for p in alone]
    for p in together:
        assert p.timing == "batch-share" and p.prefill_seconds > 0 and p.decode_seconds >= 0
        assert p.prefill_seconds + p.decode_seconds == pytest.approx(p.seconds, rel=1e-6)


def test_one_token_prompt_decodes_alone(smol, monkeypatch):
    reqs = [Request("one", smol.tokenizer.decode([smol.tokenizer.bos_token_id or 1]), max_new_tokens=2,
                    add_special_tokens=False),
            Request("two", PROMPTS[0], max_new_tokens=2)]
    smol.batched_decode, smol.batch_size = True, 8
    shapes = []
    from ctxbench.harness.backends import hf

    inner = hf.decode_rows  # greedy batched decode goes through the loop that drops finished rows, not generate()
    monkeypatch.setattr(hf, "decode_rows", lambda model, inputs, *a: shapes.append(inputs["input_ids"].shape[0])
                        or inner(model, inputs, *a))
    preds = smol.generate(reqs)
    assert shapes == [1, 1] and [p.sample_id for p in preds] == ["one", "two"]


def test_decode_groups_bound_size_and_padded_tokens():
    assert decode_groups([10] * 10, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert decode_groups([1000, 1200, 900], 8, budget=3000) == [[0, 1], [2]]  # 3 x 1200 > 3000
    assert decode_groups([40000, 10], 8, budget=32768) == [[0], [1]]  # a prompt over the budget decodes alone
    assert decode_groups([], 8) == []


def test_thinking_budget_and_seeded_sampling_in_a_batch(smol):
    """The thinking budget closes each row's open <think> at its budget, rows of different lengths; a seeded sampled
    batch is reproducible."""
    import dataclasses

    smol.batched_decode, smol.batch_size = True, 8
    think = [Request(f"t#{i}", p + "<think>\n", max_new_tokens=4, thinking=True, max_thinking_tokens=10)
             for i, p in enumerate(PROMPTS[:3])]
    for pred in smol.generate(think):
        assert "</think>" in pred.text and pred.reasoning_tokens is not None and pred.reasoning_tokens <= 10
    sampled = [dataclasses.replace(r, thinking=False, max_thinking_tokens=None, max_new_tokens=4,
                                   sampling=(("seed", 1), ("temperature", 1.5))) for r in think]
    assert [p.text for p in smol.generate(sampled)] == [p.text for p in smol.generate(sampled)]
