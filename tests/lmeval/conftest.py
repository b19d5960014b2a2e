"""Fixtures for the lm-eval integration: a tiny MMLU in lm-eval's own format, written locally (no downloads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# Subjects across all four MMLU categories (lm-eval's builtin `mmlu` group must resolve every category
# to local data, or it would download the rest). Rows in the cais/mmlu format: question, subject, choices, answer.
SUBJECTS = {
    "astronomy": [  # STEM
        ("How many planets are in the Solar System?", ["Seven", "Eight", "Nine", "Ten"], 1),
        ("What is the star at the centre of the Solar System?", ["Sirius", "Vega", "The Sun", "Polaris"], 2),
        ("Which planet is known as the Red Planet?", ["Mars", "Venus", "Jupiter", "Saturn"], 0),
    ],
    "high_school_geography": [  # social sciences
        ("What is the capital of France?", ["Berlin", "Madrid", "Paris", "Rome"], 2),
        ("Which is the largest ocean on Earth?", ["Atlantic", "Indian", "Arctic", "Pacific"], 3),
    ],
    "world_religions": [  # humanities
        ("The Vatican City is an enclave inside which city?", ["Rome", "Paris", "Athens", "Cairo"], 0),
        ("What is the holy book of Islam?", ["Torah", "Quran", "Vedas", "Tripitaka"], 1),
    ],
    "nutrition": [  # other
        ("Which vitamin does skin make in sunlight?", ["Vitamin A", "Vitamin C", "Vitamin D", "Vitamin K"], 2),
        ("Which nutrient is the body's main source of energy?", ["Carbohydrates", "Vitamins", "Minerals", "Water"], 0),
    ],
}
DEV = ("What is 2 + 2?", ["3", "4", "5", "22"], 1)


def write_tiny_mmlu(root: Path) -> Path:
    """Task YAMLs that override lm-eval's MMLU subjects with local JSON files; returns the include path.

    Each YAML includes lm-eval's own subject YAML (so prompt, choices, metric, tag and category are lm-eval's)
    and replaces only the dataset: `dataset_path: json` with `data_files`.
    """
    import lm_eval

    builtin = Path(lm_eval.__file__).parent / "tasks" / "mmlu" / "default"
    inc = root / "tasks"
    data = root / "data"
    inc.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    for subject, rows in SUBJECTS.items():
        files = {}
        for split, items in (("test", rows), ("dev", [DEV])):
            path = data / f"{subject}_{split}.jsonl"
            path.write_text("".join(json.dumps({"question": q, "subject": subject, "choices": c, "answer": a}) + "\n"
                                    for q, c, a in items))
            files[split] = str(path)
        (inc / f"mmlu_{subject}.yaml").write_text(
            f"include: {builtin / f'mmlu_{subject}.yaml'}\n"
            f"task: mmlu_{subject}\n"
            "dataset_path: json\n"
            "dataset_name: null\n"
            f"dataset_kwargs:\n  data_files:\n    test: {files['test']}\n    dev: {files['dev']}\n"
        )
    return inc


@pytest.fixture(scope="session")
def tiny_mmlu(tmp_path_factory) -> Path:
    pytest.importorskip("lm_eval")
    return write_tiny_mmlu(tmp_path_factory.mktemp("tiny_mmlu"))


@pytest.fixture(scope="session")
def smol_backend():
    """The embedded SmolLM2-135M in float32 on CPU (one load per session)."""
    from ctxbench.harness.backends.hf import HFBackend

    return HFBackend(model="smollm2-135m", dtype="float32", device="cpu", batch_size=4)


def mmlu_include_paths(tiny: Path) -> list[str]:
    """lm-eval's own MMLU groups (mmlu, mmlu_stem, ...) plus the tiny subjects; indexing just these is fast."""
    import lm_eval

    return [str(Path(lm_eval.__file__).parent / "tasks" / "mmlu" / "default"), str(tiny)]


class StubBackend:
    """A model-free backend with the scoring interface: prefers the continuation ' A'; generation via `reply`."""

    name = "stub"
    capabilities = frozenset({"generate", "loglikelihood"})

    def __init__(self, tokenizer, reply=lambda prompt: ""):
        self.tokenizer = tokenizer
        self.reply = reply
        self.context_length = 8192
        self.batch_size = 4
        self.generated: list = []

    def info(self) -> dict:
        return {"model": "stub", "context_length": self.context_length}

    def loglikelihood(self, requests):
        return [(0.0, True) if cont.strip() == "A" else (-1.0, False) for _, cont in requests]

    def loglikelihood_rolling(self, texts):
        return [-float(len(t)) for t in texts]

    def generate(self, requests):
        from ctxbench.harness.core.types import Prediction

        self.generated.extend(requests)
        return [Prediction(r.sample_id, self.reply(r.prompt), r.prompt_tokens or 0, 1, 0.0) for r in requests]


@pytest.fixture()
def stub_backend(smol_tokenizer):
    return StubBackend(smol_tokenizer)


@pytest.fixture(scope="session")
def tiny_mmlu_paths(tiny_mmlu) -> list[str]:
    return mmlu_include_paths(tiny_mmlu)


@pytest.fixture()
def make_stub(smol_tokenizer):
    return lambda reply=lambda prompt: "": StubBackend(smol_tokenizer, reply)
