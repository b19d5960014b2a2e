"""`attention: per_document` under DeepSpeed-Ulysses, on a CPU: the plumbing that the GPU tier's flash-attention run
(tests/gpu/test_document_mask_ulysses_cuda.py) relies on. DeepSpeed 0.19.8's Ulysses hands the core attention the
position ids gathered over the sequence-parallel group and no mask; flash attention 2/3 (CUDA only) mask per document
where those restart. Here a test-only attention registered through transformers' AttentionInterface does the same on a
CPU (causal SDPA within each document, the documents read from the position ids it is given), registered as `sdpa`
and so used as DeepSpeed's core attention: CPT on a per_document packing (short documents, 6-9 a sequence) over 2 processes sharing each sequence
(ZeRO-3) trains what 1 process trains with transformers' own per-document SDPA mask (loss at every step, final
weights). Measured: losses equal to 1e-7, weights to 1e-7; with DeepSpeed's plain sdpa core instead (the mask dropped,
what the refusal names) the losses differ by up to 6e-3 relative and the weights by 0.015. Were the position ids the
shard's own (not gathered), or the packing's restarts lost on the way, the masks would differ too. Slow: two torchrun
trainings (~45 s on 2 cores).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
TESTS = Path(__file__).resolve().parents[1]
ATTENTION = "sdpa"  # accelerate takes only sdpa and flash attention as Ulysses' core: the runner replaces sdpa's function

RUNNER = '''
import sys

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

import ctxbench.trainers.context_parallel as context_parallel


def per_document_sdpa(module, query, key, value, attention_mask, **kwargs):
    """Causal attention within each document, a document starting where the position ids restart at 0 (what
    flash attention's varlen path reads from them); the mask the model made is ignored, as Ulysses drops it."""
    positions = kwargs.pop("position_ids")
    kwargs.pop("is_causal", None)
    document = (positions == 0).cumsum(-1)
    n = positions.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=positions.device).tril()
    mask = (document[:, :, None] == document[:, None, :]) & causal
    return sdpa_attention_forward(module, query, key, value, mask[:, None], **kwargs)


if sys.argv[2] == "position-id-attention":  # in this process only; DeepSpeed wraps it as its core attention
    AttentionInterface.register("sdpa", per_document_sdpa)
    context_parallel.PER_DOCUMENT_ULYSSES_ATTENTION = ("sdpa",)  # it masks per document, as flash attention does

from ctxbench.harness.cli import main

sys.argv = ["ctxbench", "train", "cpt", "--config", sys.argv[1]]
main()
'''


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_docmask", TESTS / "trainers" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def short_document_packing(root: Path, tokenizer: str = "smollm2-135m") -> Path:
    """Short documents (~10-40 tokens), so every 128-token sequence holds several (6-9) and the mask matters."""
    import json
    import random

    from ctxbench.trainers.data.pipeline import SynthesisConfig, synthesize

    rng = random.Random(0)
    words = "alpha beta gamma delta river stone cloud seven orange quiet table window paper green".split()
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) for _ in range(120)]
    (root / "short.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    synthesize(SynthesisConfig(corpus={"path": str(root / "short.jsonl"), "format": "jsonl"}, method="standard",
                               seq_len=128, budget_tokens=128 * 8, tokenizer=tokenizer, seed=0,
                               out_dir=str(root / "per_document"), attention="per_document"))
    return root / "per_document"


@pytest.fixture(scope="module")
def per_document_packing(tmp_path_factory) -> Path:
    return short_document_packing(tmp_path_factory.mktemp("docmask-ulysses"))


def train(tmp_path: Path, raw: dict, nproc: int, attention: str) -> subprocess.CompletedProcess:
    runner, config = tmp_path / "runner.py", tmp_path / f"cpt-{nproc}.yaml"
    runner.write_text(RUNNER)
    config.write_text(yaml.safe_dump(raw))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(runner),
           str(config), attention]
    return subprocess.run(cmd, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=1200)


def assert_ulysses_equals_one_process(tmp_path: Path, packing: Path, attention: str, *, precision: str = "fp32",
                                      base: dict | None = None, rtol: float = 1e-4, atol: float = 5e-5) -> None:
    """1 process (transformers' own per-document masking) against Ulysses over 2 processes (ZeRO-3 both), with
    `attention` as DeepSpeed's core (`position-id-attention`: this file's test function; `transformers`: as is)."""
    ddp = _load("test_ddp")
    ds = _load("test_ddp_deepspeed").zero_config(tmp_path, 3)
    runs = {}
    for nproc in (1, 2):
        store = tmp_path / f"sp{nproc}"
        raw = ddp.cpt_raw(store, packing, 1, deepspeed=ds, sequence_parallel=nproc, eval_steps=3, save_steps=3,
                          precision=precision, attn_implementation=(base or {}).get("attn", ATTENTION),
                          data={"path": str(packing), "eval_sequences": 0})
        if base:
            raw["base_model"] = base["model"]
        done = train(tmp_path, raw, nproc, "transformers" if nproc == 1 else attention)
        assert done.returncode == 0, done.stderr[-3000:]
        [run_dir] = [p for p in store.iterdir() if p.is_dir()]
        runs[nproc] = (store, run_dir.name)
    ddp.assert_same_training(*runs[1], *runs[2], rtol=rtol, atol=atol)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed")
def test_per_document_ulysses_over_two_cpu_processes_equals_one(tmp_path, per_document_packing):
    assert_ulysses_equals_one_process(tmp_path, per_document_packing, "position-id-attention")
