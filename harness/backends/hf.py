"""Hugging Face transformers backend: local dir, hub id or GGUF; greedy generation.

Batching: on CUDA, left-padded batches of `batch_size` (16). On CPU, padding a prefill costs more than batching
saves (a one-token left pad slows a 4K prefill ~1.5x), but a decode step for 8 costs about what a step for 1 does;
so each prompt is prefilled alone and batches of up to `batch_size` (8) decode together from the merged caches
(hf_batched.py). With `batched_decode: false`, the CPU default is one request at a time, and with batch_size > 1
only prompts of exactly equal token length share a batch (never padded).
Per-sample timing: `prefill_seconds` (to the first generated token) and `decode_seconds`; `timing` says whether
they are this sample's own ("sample") or its batch's divided by the batch size ("batch-share").
Prefix reuse (prompts prefilled alone, `prefix_reuse: true`): a prompt that declares a shared prefix (the schedule's
Request.shared_prefix) is prefilled from the previous prompt's KV cache, only its suffix computed (hf_prefix.py); each
Prediction's cached_tokens counts the reused tokens. Log-likelihood scoring is in hf_loglik.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ctxbench.harness.backends.hf_batched import cache_kwarg, decode_groups, prefill_alone, prefill_batch
from ctxbench.harness.backends.hf_decode_loop import decode_rows, plain_greedy
from ctxbench.harness.backends.hf_decoding import make as make_budget
from ctxbench.harness.backends.hf_decoding import reasoning_length, sampling
from ctxbench.harness.backends.hf_loglik import LogLikelihood
from ctxbench.harness.backends.hf_prefix import PrefixCache, encode
from ctxbench.harness.core.backend import apply_truncation
from ctxbench.harness.core.errors import ConfigError, OfflineError
from ctxbench.harness.core.models import materialize, resolve
from ctxbench.harness.core.reasoning import opened_in_prompt
from ctxbench.harness.core.types import Prediction, Request


def context_length(config: Any, max_context: int, rope_context: int | None) -> int:
    """The context a run checks lengths against: max_context if given, else the config's (times a RoPE factor)."""
    return int(max_context or rope_context or getattr(config, "max_position_embeddings", 0) or 1 << 30)


class HFPlan:
    """What the plan step needs of an HF model, without its weights: the tokenizer and the context length from
    config.json (times a RoPE factor), so an over-long length or a finished rerun never waits for the weights.
    build() loads them."""

    name = "hf"
    capabilities = frozenset({"generate", "loglikelihood", "prompt_logprobs"})

    def __init__(self, *, model: str, truncation: str = "refuse", **args: Any):
        from transformers import AutoConfig, AutoTokenizer

        from ctxbench.harness.backends.rope import apply_to_hf_config

        self.args = {"model": model, "truncation": truncation, **args}
        path = materialize(resolve(model))
        try:
            config = AutoConfig.from_pretrained(path)
            self.tokenizer = AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as e:
            raise OfflineError(f"model: cannot load {model!r}: {str(e).splitlines()[0]}") from None
        rope_context = apply_to_hf_config(config, args.get("rope_scaling"))
        self.context_length = context_length(config, int(args.get("max_context") or 0), rope_context)
        self.batch_size = int(args.get("batch_size") or 1)
        given = str(args.get("dtype") or "auto")
        dtype, self.dtype_choice = resolve_dtype(given, str(args.get("device") or "auto"), config, int(args.get("threads") or 0))
        self.args["dtype"] = dtype  # the weights load in the dtype the run id hashed, whatever build() would measure
        self.resolved = {"dtype": dtype} if given == "auto" else {}

    def resolved_args(self) -> dict[str, Any]:
        """What `auto` resolved to on this machine ({"dtype": "bfloat16"}): identity, so two machines that pick
        different precisions never share a run id (harness/core/identity.py)."""
        return dict(self.resolved)

    def build(self) -> HFBackend:
        backend = HFBackend(**self.args)
        backend.dtype_choice = self.dtype_choice  # the measurement behind an `auto`, for the record
        return backend


def resolve_dtype(dtype: str, device: str, config: Any, threads: int) -> tuple[str, dict]:
    """(the torch dtype `dtype` means here, the CPU measurement behind it): an explicit dtype is itself; auto is bf16
    on a GPU, and on a CPU whichever of bf16 and fp32 is faster for this model's shapes, measured once per machine."""
    if dtype != "auto":
        return dtype, {}
    import torch

    where = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    if not where.startswith("cpu"):
        return "bfloat16", {}
    from ctxbench.harness.backends.cpu import cpu_dtype
    from ctxbench.harness.core.cores import default_threads

    return cpu_dtype(int(getattr(config, "hidden_size", 1024)), int(getattr(config, "intermediate_size", 4096)),
                     int(threads) or default_threads())


def unreadable_weights(path: str | Path) -> Path | None:
    """The first .safetensors file under `path` whose header cannot be read."""
    from safetensors import safe_open

    for f in sorted(Path(path).glob("*.safetensors")) if Path(path).is_dir() else []:
        try:
            with safe_open(str(f), framework="np"):
                pass
        except Exception:  # noqa: BLE001 - any failure to open is what we are looking for
            return f
    return None


class HFBackend(LogLikelihood):
    name = "hf"
    capabilities = HFPlan.capabilities

    def __init__(
        self,
        *,
        model: str,
        dtype: str = "auto",
        device: str = "auto",
        batch_size: int = 0,
        attn_implementation: str = "sdpa",
        threads: int = 0,
        truncation: str = "refuse",
        max_context: int = 0,
        rope_scaling: dict | str | None = None,
        batched_decode: bool = True,
        prefix_reuse: bool = True,
    ):
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from ctxbench.harness.backends.rope import apply_to_hf_config
        from ctxbench.harness.core.cores import default_threads

        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.threads = int(threads) or default_threads()  # 0: the cores not already busy (core/cores.py)
        torch.set_num_threads(self.threads)
        self.ref = resolve(model)
        path = materialize(self.ref)
        self.dtype_choice: dict = {}
        try:
            config = AutoConfig.from_pretrained(path)
            dtype, self.dtype_choice = resolve_dtype(dtype, self.device, config, self.threads)  # auto: measured
            rope_context = apply_to_hf_config(config, rope_scaling)  # TYPE:FACTOR spec or dict; None: unchanged
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(
                path, config=config, dtype=getattr(torch, dtype), attn_implementation=attn_implementation
            ).to(self.device)
        except OSError as e:
            raise OfflineError(f"model: cannot load {model!r}: {str(e).splitlines()[0]}") from None
        except Exception as e:  # a torn .safetensors (a training killed in its final save): one line naming the file
            if type(e).__name__ != "SafetensorError":
                raise
            raise ConfigError(f"model: {unreadable_weights(path) or path}: torn or corrupt weights ({str(e).splitlines()[0]}); "
                              "retrain or re-download the model") from None
        self.model.eval()
        self._pad_left()
        self.context_length = context_length(config, max_context, rope_context)
        self.padded = self.device.startswith("cuda")  # CPU: prefill alone, decode together (or equal lengths only)
        self.batched_decode = bool(batched_decode) and not self.padded
        self.batch_size = int(batch_size or (16 if self.padded else 8 if self.batched_decode else 1))
        self.prefix_reuse = bool(prefix_reuse) and not self.padded  # prompts prefilled alone: each from its shared prefix
        self.prefix = PrefixCache()  # the last prompt prefilled alone: its ids and KV cache (hf_prefix.py)
        self.prefill_tokens = {"computed": 0, "reused": 0}  # prompt tokens prefilled, and taken from the kept cache
        self.score_batch_size = int(batch_size or (16 if self.device.startswith("cuda") else 4))  # log-likelihood inputs
        self.truncation = truncation
        self.path = path
        self.dtype = dtype
        self.attn = attn_implementation
        self._torch = torch

    def _pad_left(self) -> None:
        """Batches pad on the left (the answers start together); the stops are the model's EOS ids and the pad."""
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        gen = getattr(self.model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None) or self.tokenizer.eos_token_id
        self.stop_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.pad_token_id}

    @property
    def batches_across_cells(self) -> bool:
        """The run loop batches one length's samples across cells (harness/run/full.py): a CPU decode step for 8 rows
        costs about what one for 1 does, and a cell often holds fewer samples than a batch."""
        return self.batched_decode

    def info(self) -> dict[str, Any]:
        return {
            "model": self.ref.name,
            "path": self.path,
            "gguf_file": self.ref.gguf_file,
            "dtype": self.dtype,
            "device": self.device,
            "attn_implementation": self.attn,
            "batch_size": self.batch_size,
            "batching": "padded" if self.padded else "prefill-alone" if self.batched_decode else "equal-length",
            "prefix_reuse": self.prefix_reuse,
            "threads": self.threads,
            **({"dtype_measured": self.dtype_choice} if self.dtype_choice else {}),
            "context_length": self.context_length,
            "decoding": "greedy",
        }

    def generate(self, requests: list[Request]) -> list[Prediction]:
        encoded = []
        for r in requests:
            shared = r.shared_prefix if self.prefix_reuse else 0  # the schedule's declaration, in characters
            ids, declared = encode(self.tokenizer, r.prompt, shared, r.add_special_tokens)
            ids, n_cut = apply_truncation(ids, max_new_tokens=r.generation_limit, context_length=self.context_length,
                                          policy=self.truncation, sample_id=r.sample_id)
            encoded.append((ids, n_cut, declared))
        out: dict[int, Prediction] = {}
        for group in self._groups([len(ids) for ids, _, _ in encoded]):
            for i, p in zip(group, self._batch([requests[i] for i in group], [encoded[i] for i in group])):
                out[i] = p
        return [out[i] for i in range(len(requests))]

    def _groups(self, lengths: list[int]) -> list[list[int]]:
        """Indices per generate call: padded batches in order (CUDA), runs decoded together from prompts prefilled
        alone (CPU), or batches of equal token length (CPU, batched_decode off)."""
        n = self.batch_size
        if self.padded:
            return [list(range(i, min(i + n, len(lengths)))) for i in range(0, len(lengths), n)]
        if self.batched_decode:
            return decode_groups(lengths, n)
        same: dict[int, list[int]] = {}
        for i, length in enumerate(lengths):
            same.setdefault(length, []).append(i)
        return [idx[j: j + n] for idx in same.values() for j in range(0, len(idx), n)]

    def _batch(self, batch: list[Request], encoded: list[tuple[list[int], int, int]]) -> list[Prediction]:
        thinking = batch[0].thinking  # a batch shares the run's protocol
        inputs, own_prefill, reused = self._inputs([ids for ids, _, _ in encoded], [d for _, _, d in encoded])
        if inputs is None:  # caches that cannot be merged: one at a time
            return [p for r, e in zip(batch, encoded) for p in self._batch([r], [e])]
        clock = self._clock()
        processors = clock.processors()
        if thinking:  # end the thinking at its budget: the closing tag is forced, then the answer budget follows
            processors.append(make_budget(self.tokenizer, budget=batch[0].max_thinking_tokens,
                                          prompt_len=inputs["input_ids"].shape[1],
                                          opened=[opened_in_prompt(r.prompt) for r in batch]))
        new, start, first, end, decode = self._decode(batch, inputs, processors, clock, thinking)
        k = len(batch)
        timing = "sample" if k == 1 else "batch-share"
        preds = []
        for r, (ids, n_cut, _), toks, own, cached, row_decode in zip(batch, encoded, new, own_prefill, reused, decode):
            toks = toks[: r.generation_limit]
            n = next((j for j, t in enumerate(toks) if t in self.stop_ids), len(toks))
            # thinking mode keeps special tokens: gpt-oss's channel markers are special, and the reasoning is split on them
            text = self.tokenizer.decode(toks[:n], skip_special_tokens=not r.thinking)
            share = own + (first - start) / k + row_decode  # on CUDA also its GPU-seconds: the model sits on one device
            preds.append(Prediction(r.sample_id, text, len(ids), n, share, truncated_tokens=n_cut,
                                    prefill_seconds=own + (first - start) / k, decode_seconds=row_decode, timing=timing,
                                    reasoning_tokens=reasoning_length(self.tokenizer, toks[:n]) if thinking else None,
                                    gpu_seconds=share if self.padded else None, cached_tokens=cached))
            self.prefill_tokens["reused"] += cached
            self.prefill_tokens["computed"] += len(ids) - cached
        return preds

    def _decode(self, batch: list[Request], inputs: dict[str, Any], processors: Any, clock: Any, thinking: bool):
        """(new ids per row, start, end of the prefill, end, each row's decode seconds): batched decode drops each
        row as it finishes (hf_decode_loop.py) where generate() would run plain greedy search; else generate()."""
        settings = sampling(batch[0])
        if self.batched_decode and not thinking and plain_greedy(self.model, settings):
            done = decode_rows(self.model, inputs, [r.generation_limit for r in batch], self.stop_ids)
            return done.tokens, done.start, done.first, done.end, done.decode_seconds
        start = time.perf_counter()
        with self._torch.inference_mode():
            gen = self.model.generate(**inputs, max_new_tokens=max(r.generation_limit for r in batch), **settings,
                                      pad_token_id=self.tokenizer.pad_token_id, logits_processor=processors)
        end = time.perf_counter()
        first = clock.first or end  # the first step's logits exist once the prompt is prefilled
        return gen[:, inputs["input_ids"].shape[1]:].tolist(), start, first, end, [(end - first) / len(batch)] * len(batch)

    def _inputs(self, ids_list: list[list[int]], declared: list[int] | None = None
                ) -> tuple[dict[str, Any] | None, list[float], list[int]]:
        """generate()'s inputs, each prompt's own prefill seconds (0 where the batch prefills in generate()) and its
        tokens reused from the previous prompt's cache: with prefix reuse, every prompt prefilled alone from its
        declared shared prefix; else unpadded for equal lengths (an all-ones mask, which SDPA skips), prefilled alone
        and merged for batched decode, or left-padded. None: the prompts cannot be merged (decode them one at a time)."""
        torch = self._torch
        zero, none = [0.0] * len(ids_list), [0] * len(ids_list)
        if self.prefix_reuse or (self.batched_decode and len(ids_list) > 1):
            prefill, reused = (self.prefix.batch(self.model, declared or none) if self.prefix_reuse else (prefill_alone, none))
            ready = prefill_batch(self.model, ids_list, self.tokenizer.pad_token_id, self.device, prefill)
            if ready is not None:
                inputs = {"input_ids": ready.input_ids, "attention_mask": ready.attention_mask, cache_kwarg(self.model): ready.cache}
                return inputs, list(ready.prefill_seconds), reused
            if len(ids_list) > 1:
                return None, zero, none
        if len({len(ids) for ids in ids_list}) == 1:
            input_ids = torch.tensor(ids_list, device=self.device)
            return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}, zero, none
        return self.tokenizer.pad({"input_ids": ids_list}, padding=True, return_tensors="pt").to(self.device), zero, none

    def _clock(self):
        """A logits processor that notes when the first step's logits arrive (the end of the prefill)."""
        from transformers import LogitsProcessor, LogitsProcessorList

        class FirstStep(LogitsProcessor):
            first: float | None = None

            def __call__(self, input_ids, scores):
                if self.first is None:
                    self.first = time.perf_counter()
                return scores

            def processors(self):
                return LogitsProcessorList([self])

        return FirstStep()
