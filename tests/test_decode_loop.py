"""The decode loop that drops finished rows (harness/backends/hf_decode_loop.py) on the real SmolLM2-135M (fp32):
greedy answers of a batch with mixed answer budgets and early stops equal one-at-a-time generate(), or differ only
where the top two logits tie; rows leave the batch as they finish."""

from __future__ import annotations

import pytest

from ctxbench.harness.core.types import Request

pytestmark = pytest.mark.integration

PROMPTS = ["The capital of France is",
           "Once upon a time, in a land far away, there lived a young girl who loved to read books about",
           "1, 2, 3, 4,",
           "Q: What colour is the sky on a clear day?\nA:",
           "Water boils at a temperature of",
           "List three fruits:\n1."]
# Answer budgets: rows 0 and 5 stop on a newline (at 3 tokens) before theirs, row 1 (the longest prompt, no pads)
# leaves at 3, so the pad columns the others share are cut; the rest leave at 1, 9 and 10.
LIMITS = [6, 3, 10, 9, 1, 5]
TIE = 1e-3  # top-2 logits closer than this are a tie that float rounding may break either way


@pytest.fixture()
def smol(smol_hf):
    """SmolLM2 (cpu, float32, one thread), loaded once per test process (tests/conftest.py) and reset for each test."""
    return smol_hf


def newline(smol) -> int:
    return smol.tokenizer("\n", add_special_tokens=False)["input_ids"][-1]


def cut(tokens: list[int], limit: int, stops: set[int]) -> list[int]:
    tokens = tokens[:limit]
    return tokens[: next((j + 1 for j, t in enumerate(tokens) if t in stops), len(tokens))]


def alone(smol, ids: list[int], limit: int, stops: set[int] | None = None):
    """generate() on one unpadded prompt, ending at the first of `stops` (default: the model's own): (its ids, each
    step's scores)."""
    torch = smol._torch
    inputs = torch.tensor([ids])
    ends = {"eos_token_id": sorted(stops)} if stops else {}
    with torch.inference_mode():
        out = smol.model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=limit,
                                  do_sample=False, temperature=None, top_p=None, top_k=None, **ends,
                                  pad_token_id=smol.tokenizer.pad_token_id, output_scores=True, return_dict_in_generate=True)
    return out.sequences[0, len(ids):].tolist(), [s[0] for s in out.scores]


def assert_equal_or_tie(reference, scores, got):
    if reference == got:
        return
    step = next(j for j, (x, y) in enumerate(zip(reference, got)) if x != y)
    top2 = scores[step].float().topk(2).values
    assert float(top2[0] - top2[1]) < TIE, f"not a tie at step {step}: {reference} vs {got}"


def test_rows_dropped_as_they_finish_decode_as_one_at_a_time(smol):
    from ctxbench.harness.backends.hf_batched import cache_kwarg, prefill_batch
    from ctxbench.harness.backends.hf_decode_loop import decode_rows

    stops = smol.stop_ids | {newline(smol)}  # a newline ends a row early: several leave before the longest
    ids_list = [smol.tokenizer(p)["input_ids"] for p in PROMPTS]
    ready = prefill_batch(smol.model, ids_list, smol.tokenizer.pad_token_id, "cpu")
    inputs = {"input_ids": ready.input_ids, "attention_mask": ready.attention_mask, cache_kwarg(smol.model): ready.cache}
    decoded = decode_rows(smol.model, inputs, LIMITS, stops)
    lengths = set()
    for ids, limit, got in zip(ids_list, LIMITS, decoded.tokens):
        reference, scores = alone(smol, ids, limit, stops)  # stepped only as far as the row runs
        assert_equal_or_tie(cut(reference, limit, stops), scores, got)
        assert len(got) <= limit and all(t not in stops for t in got[:-1])  # it stopped where it finished
        lengths.add(len(got))
    assert len(lengths) >= 3  # rows left the batch at different steps
    assert decoded.start <= decoded.first <= decoded.end and all(s >= 0 for s in decoded.decode_seconds)


def test_a_prompt_without_a_merged_cache_is_prefilled_by_the_first_step(smol):
    from ctxbench.harness.backends.hf_decode_loop import decode_rows

    torch = smol._torch
    ids = smol.tokenizer(PROMPTS[3])["input_ids"]
    inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    reference, scores = alone(smol, ids, 8)
    assert_equal_or_tie(cut(reference, 8, smol.stop_ids), scores, decode_rows(smol.model, inputs, [8], smol.stop_ids).tokens[0])


def test_plain_greedy_only(smol):
    from types import SimpleNamespace

    from ctxbench.harness.backends.hf_decode_loop import plain_greedy

    assert plain_greedy(smol.model, {"do_sample": False})
    assert not plain_greedy(smol.model, {"do_sample": True, "temperature": 0.7})
    assert not plain_greedy(SimpleNamespace(generation_config=SimpleNamespace(repetition_penalty=1.2)), {"do_sample": False})


def test_backend_batches_mixed_budgets_as_the_switch_off_does(smol):
    """HFBackend.generate with batched decode (rows dropped) against batched_decode false (one at a time)."""
    reqs = [Request(f"t{i % 2}@64#{i}", p, max_new_tokens=n) for i, (p, n) in enumerate(zip(PROMPTS, LIMITS))]
    saved = smol.batched_decode, smol.batch_size
    try:
        smol.batched_decode, smol.batch_size = False, 1
        off = smol.generate(reqs)
        smol.batched_decode, smol.batch_size = True, 8
        on = smol.generate(reqs)
    finally:
        smol.batched_decode, smol.batch_size = saved
    assert [p.sample_id for p in on] == [r.sample_id for r in reqs]
    assert [(p.text, p.generated_tokens) for p in on] == [(p.text, p.generated_tokens) for p in off]
    assert all(p.timing == "batch-share" and p.decode_seconds >= 0 for p in on)
