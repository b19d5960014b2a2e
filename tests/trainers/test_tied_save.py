"""A full-state save (FSDP2 under a ring) hands save_pretrained the tied head as its own tensor, so it is written
beside the embedding; trainers/tied_save.py drops it again (one file and sharded saves), and what remains loads as the
same tied model. The rings' trainings check the real FSDP2 save (tests/trainers/test_ring_cpu.py)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")


def tiny(tie: bool = True):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tie))


def saved_keys(out) -> set[str]:
    from safetensors import safe_open

    keys = set()
    for f in out.glob("*.safetensors"):
        with safe_open(str(f), "pt") as s:
            keys |= set(s.keys())
    return keys


def save_as_a_full_state_dict(model, out, **kw) -> None:
    """What FSDP2's full state dict gives save_pretrained: every weight its own tensor, the tied head included."""
    model.save_pretrained(str(out), state_dict={k: v.clone() for k, v in model.state_dict().items()}, **kw)


@pytest.mark.parametrize("shard", [None, "20KB"])
def test_the_tied_head_is_dropped_and_the_checkpoint_loads_tied(tmp_path, shard):
    from transformers import AutoModelForCausalLM

    from ctxbench.trainers.tied_save import drop_tied_copies, tied_pairs

    model = tiny()
    save_as_a_full_state_dict(model, tmp_path, **({"max_shard_size": shard} if shard else {}))
    assert "lm_head.weight" in saved_keys(tmp_path)  # the duplicate this fixes
    assert drop_tied_copies(tmp_path, tied_pairs(model)) == ["lm_head.weight"]
    assert saved_keys(tmp_path) == set(model.state_dict()) - {"lm_head.weight"}
    if shard:
        assert len(list(tmp_path.glob("*.safetensors"))) > 1
        assert "lm_head.weight" not in json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"]
    back = AutoModelForCausalLM.from_pretrained(str(tmp_path))
    assert back.lm_head.weight.data_ptr() == back.model.embed_tokens.weight.data_ptr()
    for k, v in model.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    assert drop_tied_copies(tmp_path, tied_pairs(model)) == []  # nothing more to drop


def test_an_untied_head_is_kept(tmp_path):
    from ctxbench.trainers.tied_save import drop_tied_copies, tied_pairs

    model = tiny(tie=False)
    save_as_a_full_state_dict(model, tmp_path)
    assert tied_pairs(model) == {} and drop_tied_copies(tmp_path, tied_pairs(model)) == []
    assert "lm_head.weight" in saved_keys(tmp_path)
    # a tied name whose saved value differs from its source is not a copy: kept
    assert drop_tied_copies(tmp_path, {"lm_head.weight": "model.embed_tokens.weight"}) == []
