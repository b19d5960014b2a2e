"""Drop the tied copies a full-state save writes beside the weights they are tied to.

FSDP2's full state dict (transformers 5.24 under accelerate 1.15: ring attention) hands `save_pretrained` each tied
weight as its own tensor, so the storage check that leaves out `lm_head.weight` of a model tying its embeddings sees
two tensors and writes both. The copy is harmless when loading (the head is tied again) but doubles the embedding on
disk (525 MB for Llama-3-8B's in bf16) and makes the checkpoint differ from a one-process save. Here the saved files
are rewritten without a tied target whose value equals its source; an untied model's are left alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"


def tied_pairs(model: Any) -> dict[str, str]:
    """{tied weight: the weight it is tied to} of a transformers model (empty when nothing is tied)."""
    inner = getattr(model, "module", model)
    return dict(getattr(inner, "all_tied_weights_keys", None) or {})


def drop_tied_copies(out: Path, pairs: dict[str, str]) -> list[str]:
    """Remove from the safetensors under `out` each tied weight saved beside an equal source; returns what it removed."""
    out = Path(out)
    if not pairs:
        return []
    index_path = out / INDEX
    index = json.loads(index_path.read_text()) if index_path.exists() else None
    where = index["weight_map"] if index else None

    def file_of(name: str) -> Path:
        return out / (where.get(name, "") if where is not None else SINGLE)

    dropped = []
    for target, source in pairs.items():
        if where is not None and target not in where:
            continue
        target_file, source_file = file_of(target), file_of(source)
        if target_file.is_file() and source_file.is_file() and _drop_if_equal(target_file, source_file, target, source):
            dropped.append(target)
            if where is not None:
                del where[target]
    if index and dropped:
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return dropped


def _drop_if_equal(target_file: Path, source_file: Path, target: str, source: str) -> bool:
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(target_file), "pt") as f:
        metadata = f.metadata()
        if target not in f.keys():
            return False
    tensors = load_file(str(target_file))
    with safe_open(str(source_file), "pt") as f:
        if source not in f.keys() or not torch.equal(f.get_tensor(source), tensors[target]):
            return False
    del tensors[target]
    save_file(tensors, str(target_file), metadata=metadata or {"format": "pt"})
    return True
