"""A model-free backend that answers with the end of the prompt. For testing the pipeline only."""

from __future__ import annotations

import time

from ctxbench.harness.core.types import Prediction, Request


class EchoBackend:
    name = "echo"
    capabilities = frozenset({"generate"})
    def __init__(self, *, model: str, delay: float = 0.0, context_length: int = 1 << 30, batch_size: int = 8):
        from ctxbench.harness.core.models import load_tokenizer

        self.model = model
        self.tokenizer = load_tokenizer(model)
        self.delay = float(delay)
        self.context_length = int(context_length)
        self.batch_size = int(batch_size)

    def info(self) -> dict:
        return {"model": self.model, "delay": self.delay, "batch_size": self.batch_size}

    def generate(self, requests: list[Request]) -> list[Prediction]:
        out = []
        for r in requests:
            time.sleep(self.delay)
            out.append(Prediction(r.sample_id, r.prompt[-80:], r.prompt_tokens or 0, 0, self.delay))
        return out
