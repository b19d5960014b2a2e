"""Run-time hooks of the lm-eval tasks written by `ctxbench export lm-eval` (see harness/lmeval_export/__init__.py).

lm-eval calls ``dataset`` (the YAML's ``custom_dataset``) to build one (task, length) test split with ctxbench's
own generator, and ``process_results`` to score each answer with the ctxbench task's own metric, so exported
tasks score exactly as `ctxbench score` does (any-of string_match_part for qa_1/qa_2).

A sample depends only on (task args, length, index, seed, tokenizer, template): never on which other tasks or
lengths run, or in what order. The tokenizer must be the evaluated model's; it comes from, in order:
the environment variable CTXBENCH_TOKENIZER, lm-eval's metadata (``--model_args pretrained=...`` or
``tokenizer=...``, or ``--metadata '{"tokenizer": ...}'``), or the default given at export time.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

TOKENIZER_ENV = "CTXBENCH_TOKENIZER"
DATA_DIR_ENV = "CTXBENCH_DATA_DIR"
TOKENIZER_KEYS = ("tokenizer", "pretrained", "model")


def tokenizer_spec(metadata: dict[str, Any], default: str | None = None) -> str:
    if os.environ.get(TOKENIZER_ENV):
        return os.environ[TOKENIZER_ENV]
    for key in TOKENIZER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    if default:
        return default
    raise ValueError(
        "ctxbench tasks size each prompt with the evaluated model's tokenizer: run lm_eval with "
        f"--model_args pretrained=<model dir>, or --metadata '{{\"tokenizer\": \"<dir>\"}}', or set {TOKENIZER_ENV}"
    )


@functools.cache
def _tokenizer(spec: str):
    from ctxbench.harness.core.models import load_tokenizer

    return load_tokenizer(spec)


@functools.cache
def _task(task: str, name: str | None, args_json: str):
    from ctxbench.harness.core.config import TaskSpec, build_task

    return build_task(TaskSpec(task=task, name=name, args=json.loads(args_json)), where=f"ctxbench task {name or task}")


def _args_json(args: Any) -> str:
    return json.dumps(json.loads(args) if isinstance(args, str) else (args or {}), sort_keys=True)


def samples(*, ctxbench_task: str, ctxbench_length: int, ctxbench_samples: int, ctxbench_seed: int = 42,
            ctxbench_args: Any = None, ctxbench_name: str | None = None, ctxbench_template: str = "auto",
            ctxbench_tokenizer: str | None = None, ctxbench_data_dir: str | None = None, ctxbench_verify: str = "auto",
            **metadata: Any) -> list[dict[str, Any]]:
    """The exported task's documents, as plain dicts (one per sample)."""
    from pathlib import Path

    from ctxbench.harness.core import datasets
    from ctxbench.harness.core.context import GenContext
    from ctxbench.harness.core.fitting import resolve_mode
    from ctxbench.harness.core.prompting import PromptRenderer

    tok = _tokenizer(tokenizer_spec(metadata, ctxbench_tokenizer))
    data_dir = os.environ.get(DATA_DIR_ENV) or metadata.get("data_dir") or ctxbench_data_dir
    args_json = _args_json(ctxbench_args)
    task = _task(ctxbench_task, ctxbench_name, args_json)
    ctx = GenContext(tok, PromptRenderer(tok, ctxbench_template), data_dir=Path(data_dir) if data_dir else None,
                     verify=resolve_mode(ctxbench_verify, int(ctxbench_samples or 1)))
    n = task.samples_per_length(ctx)
    n = int(ctxbench_samples) if n is None else int(n)  # a task's own count wins, as in the runner
    out = []
    for s in datasets.generate(task, length=int(ctxbench_length), indices=range(n),
                               seed=int(ctxbench_seed), ctx=ctx):
        out.append({
            "input": s.prompt, "answers": list(s.answers), "index": s.index, "length": s.length,
            "prompt_tokens": s.prompt_tokens, "max_new_tokens": s.max_new_tokens, "metric": s.metric,
            "ctxbench_task": ctxbench_task, "ctxbench_name": ctxbench_name or ctxbench_task, "ctxbench_args": args_json,
            "sample": json.dumps(s.to_json(), ensure_ascii=False),
        })
    return out


def dataset(**kwargs: Any):
    """lm-eval ``custom_dataset``: {"test": datasets.Dataset} of one (task, length)."""
    import datasets as hf_datasets

    return {"test": hf_datasets.Dataset.from_list(samples(**kwargs))}


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """Score one answer with the ctxbench task's own metric (in [0, 1])."""
    from ctxbench.harness.core.types import Sample

    name = doc.get("ctxbench_name") or doc["ctxbench_task"]
    task = _task(doc["ctxbench_task"], name if name != doc["ctxbench_task"] else None, doc["ctxbench_args"])
    sample = Sample.from_json(json.loads(doc["sample"]))
    prediction = results[0] if results else ""
    return {"score": float(task.score(prediction, sample))}
