"""A model-free backend that answers with the end of the prompt. For testing the pipeline only."""

from __future__ import annotations

import random
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
            out.append(Prediction(r.sample_id, self._answer(r), r.prompt_tokens or 0, 0, self.delay))
        return out

    @staticmethod
    def _answer(r: Request) -> str:
        """The end of the prompt; with sampling (--gen-kwargs), the whole prompt (where the answer is) or nothing, drawn
        from the seed, the repeat and the sample, so repeats differ as a sampled model's would (to test averaging)."""
        if not r.sampling:
            return r.prompt[-80:]
        seed = dict(r.sampling).get("seed", 0)
        return r.prompt if random.Random(f"{seed}:{r.sample_id}").random() < 0.5 else ""
