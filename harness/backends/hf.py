"""Hugging Face transformers backend: local dir, hub id or GGUF; batched greedy generation."""

from __future__ import annotations

import time
from typing import Any

from harness.backends.base import apply_truncation
from harness.errors import ConfigError, OfflineError
from harness.models import materialize, resolve
from harness.types import Prediction, Request


class HFBackend:
    name = "hf"

    def __init__(
        self,
        *,
        model: str,
        dtype: str = "bfloat16",
        device: str = "auto",
        batch_size: int = 0,
        attn_implementation: str = "sdpa",
        threads: int = 0,
        truncation: str = "refuse",
        max_context: int = 0,
        rope_scaling: dict | None = None,
    ):
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(int(threads))
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.ref = resolve(model)
        path = materialize(self.ref)
        if not hasattr(torch, dtype):
            raise ConfigError(f"backend_args.dtype: unknown torch dtype {dtype!r}; use bfloat16, float16 or float32")
        try:
            config = AutoConfig.from_pretrained(path)
            if rope_scaling:
                config.rope_scaling = dict(rope_scaling)
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(
                path, config=config, dtype=getattr(torch, dtype), attn_implementation=attn_implementation
            ).to(self.device)
        except OSError as e:
            raise OfflineError(f"model: cannot load {model!r}: {str(e).splitlines()[0]}") from None
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.context_length = int(max_context or getattr(config, "max_position_embeddings", 0) or 1 << 30)
        self.batch_size = int(batch_size or (16 if self.device.startswith("cuda") else 4))
        self.truncation = truncation
        self.path = path
        self.dtype = dtype
        self.attn = attn_implementation
        self._torch = torch
        gen = getattr(self.model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None) or self.tokenizer.eos_token_id
        self.stop_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.pad_token_id}

    def info(self) -> dict[str, Any]:
        return {
            "model": self.ref.name,
            "path": self.path,
            "gguf_file": self.ref.gguf_file,
            "dtype": self.dtype,
            "device": self.device,
            "attn_implementation": self.attn,
            "batch_size": self.batch_size,
            "context_length": self.context_length,
            "decoding": "greedy",
        }

    def generate(self, requests: list[Request]) -> list[Prediction]:
        out: list[Prediction] = []
        for i in range(0, len(requests), self.batch_size):
            out.extend(self._batch(requests[i : i + self.batch_size]))
        return out

    def _batch(self, batch: list[Request]) -> list[Prediction]:
        torch = self._torch
        max_new = max(r.max_new_tokens for r in batch)
        encoded, cut = [], []
        for r in batch:
            ids = self.tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"]
            ids, n_cut = apply_truncation(ids, max_new_tokens=r.max_new_tokens, context_length=self.context_length,
                                          policy=self.truncation, sample_id=r.sample_id)
            encoded.append(ids)
            cut.append(n_cut)
        padded = self.tokenizer.pad({"input_ids": encoded}, padding=True, return_tensors="pt").to(self.device)
        start = time.perf_counter()
        with torch.inference_mode():
            gen = self.model.generate(
                **padded, max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None, top_k=None,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        seconds = time.perf_counter() - start
        new = gen[:, padded["input_ids"].shape[1]:].tolist()
        preds = []
        for r, ids, toks, n_cut in zip(batch, encoded, new, cut):
            toks = toks[: r.max_new_tokens]
            n = next((j for j, t in enumerate(toks) if t in self.stop_ids), len(toks))
            text = self.tokenizer.decode(toks[:n], skip_special_tokens=True)
            preds.append(Prediction(r.sample_id, text, len(ids), n, seconds / len(batch), truncated_tokens=n_cut))
        return preds
