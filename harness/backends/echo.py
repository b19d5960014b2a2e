"""A model-free backend that answers with the end of the prompt. For testing the pipeline only."""

from __future__ import annotations

import random
import time

from ctxbench.harness.core.types import Prediction, Request, run_fingerprint


class EchoBackend:
    name = "echo"
    capabilities = frozenset({"generate"})
    def __init__(self, *, model: str, delay: float = 0.0, context_length: int = 1 << 30, batch_size: int = 8,
                 accuracy: float | dict[str, float] | None = None):
        from ctxbench.harness.core.models import load_tokenizer

        self.model = model
        self.tokenizer = load_tokenizer(model, light=True)  # counts and renders only: no transformers import
        self.delay = float(delay)
        self.context_length = int(context_length)
        self.batch_size = int(batch_size)
        self.accuracy = accuracy

    def fingerprint(self) -> str:
        """`echo:<the tokenizer model's fingerprint>`: the answers come from the prompt, never from the model's weights,
        so the run is never filed under the model whose tokenizer it borrows (it registers model_free=True)."""
        from ctxbench.harness.core.errors import ConfigError
        from ctxbench.harness.core.models import weights_fingerprint

        try:
            weights = weights_fingerprint(self.model)
        except (ConfigError, OSError):
            weights = "name:" + self.model
        return run_fingerprint(self.name, weights)

    def info(self) -> dict:
        return {"model": self.model, "delay": self.delay, "batch_size": self.batch_size}

    def generate(self, requests: list[Request]) -> list[Prediction]:
        out = []
        for r in requests:
            time.sleep(self.delay)
            text = self._answer(r) if self.accuracy is None else self._drawn(r)
            # counted tokens (the prompt's as planned, the answer's by the tokenizer), so a run's token account and a
            # test's price table have numbers to work on; echo itself costs nothing unless a price table names it
            generated = len(self.tokenizer.encode(text, add_special_tokens=False)) if text else 0
            out.append(Prediction(r.sample_id, text, r.prompt_tokens or 0, generated, self.delay, token_source="counted"))
        return out

    def _drawn(self, r: Request) -> str:
        """The whole prompt (right, where the answer is in it) with probability `accuracy` at the sample's length,
        else nothing; drawn from the sample id alone, so a rerun or a longer run answers each sample alike."""
        length = r.sample_id.split("@", 1)[-1].split("#", 1)[0]
        p = self.accuracy.get(length, 0.0) if isinstance(self.accuracy, dict) else float(self.accuracy)
        return r.prompt if random.Random(f"accuracy:{r.sample_id}").random() < p else ""

    @staticmethod
    def _answer(r: Request) -> str:
        """The end of the prompt; with sampling (--gen-kwargs), the whole prompt (where the answer is) or nothing, drawn
        from the seed, the repeat and the sample, so repeats differ as a sampled model's would (to test averaging)."""
        if not r.sampling:
            return r.prompt[-80:]
        seed = dict(r.sampling).get("seed", 0)
        return r.prompt if random.Random(f"{seed}:{r.sample_id}").random() < 0.5 else ""
