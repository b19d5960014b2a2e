"""`attention: per_document` packing: each document of a pack trains as if alone (loss and gradients of a tiny random
Llama in fp32), the packing records where documents start, and the option is in the data identity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

VOCAB, BOS, EOS = 97, 1, 2
SEQ = 64


def tiny_llama(attn: str = "sdpa"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, bos_token_id=BOS, eos_token_id=EOS)
    cfg._attn_implementation = attn
    return LlamaForCausalLM(cfg).float()


def framed_docs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [np.concatenate([[BOS], rng.integers(3, VOCAB, n), [EOS]]) for n in (20, 9, 31)]


def summed_loss(model, batch):
    """The model's own loss (what transformers' Trainer uses), as a sum over the predicted tokens."""
    inputs = {k: batch[k] for k in ("input_ids", "labels", "position_ids", "attention_mask", "use_cache") if k in batch}
    out = model(**inputs)
    return out.loss * (batch["labels"][:, 1:] != -100).sum()


def grads_of(model, loss_fn):
    model.zero_grad()
    loss = loss_fn()
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_per_document_pack_trains_as_each_document_alone(attn):
    from ctxbench.trainers.chunked_loss import model_inputs
    from ctxbench.trainers.cpt import collate_packed
    from ctxbench.trainers.data.pipeline import document_starts

    model = tiny_llama(attn)
    docs = framed_docs()
    seq = np.concatenate(docs).astype(np.int64)
    rows = [{"input_ids": seq, "doc_starts": document_starts(seq, EOS).astype(np.int64)}]
    packed = model_inputs(collate_packed(rows), per_document=True)  # as the packed-LM trainer feeds the model
    alone = [collate_packed([{"input_ids": d.astype(np.int64)}]) for d in docs]

    def sum_alone():
        return sum(summed_loss(model, {k: b[k] for k in ("input_ids", "labels")}) for b in alone)

    ref, ref_grads = grads_of(model, sum_alone)
    got, grads = grads_of(model, lambda: summed_loss(model, packed))
    assert got.item() == pytest.approx(ref.item(), rel=1e-5)
    for name, g in ref_grads.items():
        assert torch.allclose(grads[name], g, rtol=1e-4, atol=1e-5), name
    cross = model_inputs(collate_packed([{"input_ids": seq}]), per_document=False)
    assert summed_loss(model, cross).item() != pytest.approx(ref.item(), rel=1e-3)  # across documents: not alone


def test_the_chunked_loss_under_per_document_attention_is_the_same_sum():
    from ctxbench.trainers.chunked_loss import lm_loss_sum, model_inputs
    from ctxbench.trainers.cpt import collate_packed
    from ctxbench.trainers.data.pipeline import document_starts

    model = tiny_llama()
    seq = np.concatenate(framed_docs()).astype(np.int64)
    rows = [{"input_ids": seq, "doc_starts": document_starts(seq, EOS).astype(np.int64)}]
    batch = model_inputs(collate_packed(rows), per_document=True)
    with torch.no_grad():
        full = summed_loss(model, batch)
        chunked, n = lm_loss_sum(model, batch["input_ids"], batch["labels"], chunk_tokens=8,
                                 position_ids=batch["position_ids"])
    assert chunked.item() == pytest.approx(full.item(), rel=1e-6) and int(n) == len(seq) - 3


def test_positions_restart_at_every_document_and_the_boundary_is_not_predicted():
    from ctxbench.trainers.cpt import collate_packed
    from ctxbench.trainers.data.pipeline import document_starts

    seq = np.array([7, 8, EOS, BOS, 5, 6, EOS, BOS, 9], dtype=np.int64)  # the rest of a document, then two more
    starts = document_starts(seq, EOS)
    assert starts.tolist() == [0, 3, 7]
    batch = collate_packed([{"input_ids": seq, "doc_starts": starts}])
    assert batch["position_ids"][0].tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1]
    assert (batch["labels"][0] == -100).nonzero().flatten().tolist() == [0, 3, 7]
    assert document_starts(np.array([3, 4, EOS]), EOS).tolist() == [0]  # a sequence ending on EOS: no empty document


@pytest.fixture(scope="module")
def packings(tmp_path_factory) -> dict[str, Path]:
    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize
    from ctxbench.trainers.data.stdlib_corpus import resolve_corpus

    root = tmp_path_factory.mktemp("docmask")
    corpus = resolve_corpus({"path": "stdlib:json"}, root)
    out = {}
    for attention in ("cross_document", "per_document"):
        synthesize(SynthesisConfig(corpus=corpus, method="standard", seq_len=128, budget_tokens=128 * 12, shard_size=5,
                                   tokenizer="smollm2-135m", seed=0, out_dir=str(root / attention), attention=attention))
        out[attention] = root / attention
    return out


def test_per_document_packing_writes_the_starts_beside_the_same_tokens(packings):
    from ctxbench.trainers.cpt import PackedSequences
    from ctxbench.trainers.data.shards import read_manifest

    cross, per = (read_manifest(packings[a]) for a in ("cross_document", "per_document"))
    assert cross.stats["shard_sha256"] == per.stats["shard_sha256"]  # the tokens are the same
    assert "attention" not in cross.config and per.config["attention"] == "per_document"
    assert cross.identity != per.identity and cross.config_hash != per.config_hash
    with np.load(packings["cross_document"] / "shard-00000.docs.npz") as side:
        assert "starts" not in side.files  # the default writes what it wrote before the option
    eos = per.stats["separators"]["eos"]
    rows = PackedSequences(packings["per_document"])
    assert len(rows) == 12 and not PackedSequences(packings["cross_document"]).per_document
    for i in range(len(rows)):
        row = rows[i]
        ids, starts = row["input_ids"], row["doc_starts"]
        assert starts[0] == 0 and all(ids[s - 1] == eos for s in starts[1:])
        assert len(starts) == 1 + int((ids[:-1] == eos).sum())


def test_cpt_trains_per_document_with_the_chunked_loss_and_the_data_hash_moves(tmp_path, packings):
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

    def config(path: Path, **kw) -> CPTConfig:
        return CPTConfig(base_model={"config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                                "num_attention_heads": 2, "num_key_value_heads": 1}},
                         store=str(tmp_path / "runs"), max_steps=2, per_device_batch_size=2, save_steps=10, threads=1,
                         data={"path": str(path), "eval_sequences": 2}, **kw)

    per = CPTTrainer(config(packings["per_document"], loss_chunk_tokens=48))
    cross = CPTTrainer(config(packings["cross_document"]))
    assert per.data.data_hash != cross.data.data_hash and per.run_id != cross.run_id
    assert per.hf_trainer_class().__name__ == "PackedLMTrainer"
    assert cross.hf_trainer_class().__name__ == "Trainer"
    result = per.train()
    assert result.steps == 2 and result.train_loss is not None and np.isfinite(result.train_loss)


def test_per_document_under_sequence_parallelism_runs_only_where_attention_masks_per_document(tmp_path, packings,
                                                                                                monkeypatch):
    """DeepSpeed-Ulysses hands the core attention the gathered position ids and no mask: flash attention 2/3 mask per
    document from them (taken); SDPA's mask is dropped and flex's rebuilt plain causal, and torch's ring attention is
    causal SDPA: each refused in one line, before any data."""
    from ctxbench.harness.core.errors import ConfigError
    from ctxbench.trainers.cpt import CPTConfig, CPTTrainer

    monkeypatch.setenv("WORLD_SIZE", "2")

    def check(**kw) -> None:
        cfg = CPTConfig(base_model={"config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                               "num_attention_heads": 2, "num_key_value_heads": 1}},
                        store=str(tmp_path / "runs"), data={"path": str(packings["per_document"])}, **kw)
        CPTTrainer(cfg).check_sequence_parallel(128)

    check(sequence_parallel=2, deepspeed="zero3", attn_implementation="flash_attention_2")
    check(sequence_parallel=2, deepspeed="zero3", attn_implementation="flash_attention_3")
    with pytest.raises(ConfigError, match=r"^attention: per_document packing under sequence_parallel 2 needs "
                                          r"attn_implementation flash_attention_2 or flash_attention_3, not sdpa: "
                                          r"DeepSpeed-Ulysses drops the per-document mask .*flash_attention_2") as e:
        check(sequence_parallel=2, deepspeed="zero3", attn_implementation="sdpa")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^sequence_parallel: 2 needs attn_implementation sdpa or flash"):
        check(sequence_parallel=2, deepspeed="zero3", attn_implementation="flex_attention")
    with pytest.raises(ConfigError, match=r"^attention: per_document packing does not run under sequence_parallel"
                                          r"\.ring 2: torch's ring attention takes a plain causal mask") as e:
        check(sequence_parallel={"ring": 2})
    assert "\n" not in str(e.value) and not (tmp_path / "runs").exists()
