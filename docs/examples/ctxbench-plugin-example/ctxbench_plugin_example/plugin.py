"""What this plugin adds to ctxbench's registry, each by one decorator:

- task `example/secret_word` with the argument `copies`: find a word hidden in filler text;
- metric `example/first_word`: 1 if the prediction's first word is the reference, else 0;
- backend `example_constant` with the arguments `answer` and `workers` (speed only), sampling with --gen-kwargs:
  answers every prompt with the same text;
- suite `example-secret`: the task at two lengths with two copies of the word (example-secret.yaml);
- packing method `example_sorted`: example packing with documents sorted by length;
- trainer `example_tail`: continued pretraining with a loss that weighs later positions more.

Heavy imports (numpy here; torch in a real backend) stay inside functions, so listing tasks stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.registry import register
from ctxbench.tasks.base import Task, TaskArgs

FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
WORDS = ("amber", "basil", "cobalt", "dahlia", "ember", "fennel", "garnet", "hazel", "indigo", "juniper")
QUESTION = "\nOne unusual word is hidden in the text above. What is it? Answer with that word only."


# --- a task ------------------------------------------------------------------------------------------
# --8<-- [start:task]

class SecretWordArgs(TaskArgs):
    copies: int = Field(1, ge=1, le=20, description="how many times the word is hidden, spread evenly over the text")
    tokens_to_generate: int = Field(8, ge=1, description="tokens the answer may take")
    answer_prefix: str = Field("Answer:", description="start of the model's turn")


class SecretWord(Task):
    Args = SecretWordArgs
    category = "retrieval"
    metric = "example/first_word"
    summary = "find one word hidden {copies} time(s) in filler text"

    def text(self, word: str, blocks: int) -> str:
        every = max(1, blocks // (self.args.copies + 1))
        hidden = {every * (i + 1) for i in range(self.args.copies)}
        return "".join(FILLER + (f"The secret word is {word}. " if i in hidden else "") for i in range(blocks)) + QUESTION

    def generate(self, *, length: int, index: int, seed: int, ctx):
        rng, _ = self.rngs(length, index, seed)  # depends only on (task, args, length, index, seed)
        word = rng.choice(WORDS)
        budget = length - self.args.tokens_to_generate
        blocks = max(1, budget // int(ctx.piece_counts([FILLER])[0]))
        while blocks >= self.args.copies:
            rendered = ctx.renderer.render(self.text(word, blocks), self.args.answer_prefix)
            tokens = ctx.count(rendered)
            if tokens <= budget:
                return self.make_sample(length=length, index=index, text=rendered, tokens=tokens, answers=[word])
            blocks = min(blocks - 1, blocks * budget // tokens)
        raise ConfigError(f"{self.name}: length {length} is too short for {self.args.copies} copies; raise the length")


@register("task", "example/secret_word", args=SecretWordArgs)
def secret_word(**args):
    return SecretWord("example/secret_word", SecretWordArgs(**args))
# --8<-- [end:task]


# --- a metric ----------------------------------------------------------------------------------------
# --8<-- [start:metric]

@register("metric", "example/first_word")
def first_word(prediction: str, references: Sequence[str]) -> float:
    """1.0 if the first word of the prediction is the first reference (case and punctuation ignored)."""
    words = re.findall(r"[a-z]+", prediction.lower())
    return float(bool(words) and words[0] == references[0].lower())
# --8<-- [end:metric]


# --- a backend ---------------------------------------------------------------------------------------
# --8<-- [start:backend]

class ConstantArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    answer: str = Field("amber", description="the text every request is answered with")
    # Speed only: the answers are the same at any value, so a resume with another value continues the same run
    # (json_schema_extra={"execution": True}; a field that says nothing changes results, and the run id with it).
    workers: int = Field(1, ge=1, description="requests answered per generate() call", json_schema_extra={"execution": True})


class ConstantBackend:
    """The smallest complete backend: a tokenizer (to fit prompts), a context length, info() and generate(). With
    --gen-kwargs (it registers samples=True) it answers or stays silent, drawn from the seed and the sample, as a
    sampled model's answers differ from seed to seed; greedy, it always answers."""

    name = "example_constant"
    capabilities = frozenset({"generate"})

    def __init__(self, *, model: str, answer: str, workers: int):
        from ctxbench.harness.core.models import load_tokenizer

        self.model, self.answer, self.batch_size = model, answer, workers
        self.tokenizer = load_tokenizer(model, light=True)  # counts and renders only: no transformers import
        self.context_length = 1 << 20

    def info(self) -> dict:
        return {"model": self.model, "answer": self.answer}

    def generate(self, requests):
        import random

        from ctxbench.harness.core.types import Prediction

        def reply(r) -> str:
            seed = dict(r.sampling or ()).get("seed", 0)
            return self.answer if not r.sampling or random.Random(f"{seed}:{r.sample_id}").random() < 0.5 else ""

        return [Prediction(r.sample_id, reply(r), r.prompt_tokens or 0, 1, 0.0) for r in requests]


# args: its --backend-arg keys, checked before anything is written; samples: it decodes with --gen-kwargs.
@register("backend", "example_constant", args=ConstantArgs, samples=True)
def constant_backend(*, model: str, truncation: str = "refuse", **kwargs):
    from ctxbench.harness.core.backend import parse_backend_args

    args = parse_backend_args(ConstantArgs, kwargs, backend="example_constant")
    return ConstantBackend(model=model, answer=args.answer, workers=args.workers)
# --8<-- [end:backend]


# --- a suite -----------------------------------------------------------------------------------------
# --8<-- [start:suite]

@register("suite", "example-secret")
def example_secret_suite() -> Path:
    """A named suite: `ctxbench score --suite example-secret` finds this YAML (shipped as package data)."""
    return Path(__file__).with_name("example-secret.yaml")
# --8<-- [end:suite]


# --- a packing method --------------------------------------------------------------------------------
# --8<-- [start:packing]

class SortedArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    descending: bool = Field(False, description="longest documents first")


def _register_packing() -> None:
    """Packing lives in the training layer; register it only where that layer is installed."""
    try:
        from ctxbench.trainers.data.methods import register_method
        from ctxbench.trainers.data.packing import StreamPacker
    except ImportError:
        return

    @register_method("example_sorted", SortedArgs)
    def build_sorted(*, framer, args: SortedArgs, seed: int, **_):
        """Example packing with documents sorted by length instead of shuffled (an ablation of the order)."""
        import numpy as np

        lengths = np.array([framer.framed_len(i) for i in range(len(framer.corpus))])
        order = np.argsort(-lengths if args.descending else lengths, kind="stable")
        return SortedPacker(framer, seed, order_fn=lambda epoch: order)

    class SortedPacker(StreamPacker):
        name = "example_sorted"  # how the packing's manifest and `data inspect` name it


_register_packing()
# --8<-- [end:packing]


# --- a trainer ---------------------------------------------------------------------------------------
# --8<-- [start:trainer]
def _register_trainer() -> None:
    """CPT with a position-weighted loss. Registered only where the training layer is installed."""
    try:
        from ctxbench.trainers.cpt import CPTConfig, CPTTrainer
    except ImportError:
        return

    class TailConfig(CPTConfig):
        tail_weight: float = Field(2.0, ge=1.0, description="loss weight of the last position relative to the first")

    @register("trainer", "example_tail")
    class TailTrainer(CPTTrainer):
        """Continued pretraining whose loss weighs later positions more (they depend on more context)."""

        name = "example_tail"
        config_cls = TailConfig

        def hf_trainer_class(self) -> type:
            import torch

            base, top = super().hf_trainer_class(), self.config.tail_weight

            class TailWeighted(base):
                def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                    labels = inputs.pop("labels")
                    outputs = model(**inputs)
                    target = labels[:, 1:]
                    nll = torch.nn.functional.cross_entropy(outputs.logits[:, :-1].float().transpose(1, 2), target,
                                                            reduction="none", ignore_index=-100)
                    weights = torch.linspace(1.0, top, nll.shape[1], device=nll.device) * (target != -100)
                    loss = (nll * weights).sum() / weights.sum()
                    return (loss, outputs) if return_outputs else loss

            return TailWeighted


_register_trainer()
# --8<-- [end:trainer]
