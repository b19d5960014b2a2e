"""vLLM offline backend (`--backend vllm`): `vllm.LLM` fed the exact token ids of our rendered prompts.

Prompts are rendered by harness.prompting (chat template + task text + answer prefix) like every other
backend, tokenized here exactly as the HF backend does, and sent as `TokensPrompt(prompt_token_ids=...)`,
so vLLM never re-templates or re-tokenizes. Decoding is greedy (temperature 0); generation stops at the
model's EOS ids (tokenizer + generation_config, as HF) and the text is decoded locally as HF does.

Backend args (`--backend-arg KEY=VALUE`):
    tensor_parallel_size, pipeline_parallel_size   GPUs per engine = tp x pp
    data_parallel_size     independent engines, each on its own tp x pp GPUs (see below); default 1
    max_model_len          context length (default: the model's, or original x factor with rope_scaling)
    gpu_memory_utilization default 0.9
    enable_prefix_caching  default true; enable_chunked_prefill default true
    rope_scaling           TYPE:FACTOR (linear, dynamic, yarn, llama3) -> hf_overrides {"rope_parameters": ...}
    hf_overrides           a JSON object merged into the HF config (after rope_scaling)
    dtype, max_num_seqs, max_num_batched_tokens, enforce_eager, seed, kv_cache_dtype
    engine_args            a JSON object of any other vllm EngineArgs, passed through
    batch_size             requests per generate() call from the runner (default 512: big batches let the
                           scheduler and the prefix cache work; one chunk is lost at most if the run dies)

Within each generate() call the requests are reordered for prefix-cache reuse (harness.backends.ordering:
lexicographic order of token ids, so depth-grid cells and questions on one document are adjacent).

Data parallelism: vLLM's own `data_parallel_size` in the offline LLM class targets MoE expert parallelism
and needs one process per rank launched by the caller. For dense models we run `data_parallel_size`
independent engines instead: worker processes (spawned) that each see only their tp x pp GPUs through
CUDA_VISIBLE_DEVICES. Each generate() call cuts the prefix-ordered requests into contiguous runs of equal
token weight, one per engine, so shared prefixes stay on one engine's cache. Across machines, run one
ctxbench process per machine on a disjoint shard of the samples instead (the lead's `--shard i/n`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from ctxbench.harness.backends.args import VLLMArgs
from ctxbench.harness.backends.ordering import prefix_order, split_balanced
from ctxbench.harness.backends.vllm_config import build_engine_kwargs, flag, json_object, model_config, stop_ids
from ctxbench.harness.core.backend import apply_truncation, check_window, parse_backend_args
from ctxbench.harness.core.errors import ConfigError
from ctxbench.harness.core.extras import extra_error, require_extra
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import LogprobRequest, Prediction, Request, TokenLogprobs

VLLM_NOTE = " (CUDA GPUs only)"


@register("backend", "vllm", args=VLLMArgs, samples=True, distributions=("vllm", "torch", "transformers"),
          batch_dependent=True)
def vllm_backend(*, model: str, truncation: str = "refuse", **kwargs):
    args = parse_backend_args(VLLMArgs, kwargs, backend="vllm")
    require_extra("vllm", for_="backend vllm", note=VLLM_NOTE)
    return VLLMBackend(model=model, truncation=truncation, **args.model_dump())


def import_vllm():
    """The vllm module, or a ConfigError that says how to install it."""
    try:
        import vllm
    except ImportError as e:  # installed but broken: name the module that failed
        raise extra_error("vllm", for_="backend vllm", missing=e.name, note=VLLM_NOTE) from None
    return vllm


def _tokens_prompt(vllm, ids: list[int]):
    try:
        from vllm.inputs import TokensPrompt
    except ImportError:  # a TypedDict: the plain dict is the same thing
        return {"prompt_token_ids": ids}
    return TokensPrompt(prompt_token_ids=ids)


def run_llm(llm, vllm, prompts: list[list[int]], max_tokens: list, stop_ids: list[int]) -> list[tuple]:
    """Generation of token-id prompts on one engine: [(generated ids, finish_reason, cached tokens)]. Each entry of
    max_tokens is a limit (greedy) or (limit, sampling settings) for a run with --gen-kwargs."""
    params = []
    for m in max_tokens:
        limit, sampling = (m, {}) if isinstance(m, int) else (m[0], dict(m[1]))
        params.append(vllm.SamplingParams(**{"temperature": 0.0, **sampling}, max_tokens=int(limit),
                                          stop_token_ids=list(stop_ids), skip_special_tokens=True, detokenize=False))
    outputs = llm.generate([_tokens_prompt(vllm, ids) for ids in prompts], params, use_tqdm=False)
    return [(list(o.outputs[0].token_ids), o.outputs[0].finish_reason, getattr(o, "num_cached_tokens", None))
            for o in outputs]


def _limit(r: Request) -> int | tuple[int, dict]:
    """What run_llm needs of a request: its generation limit, and its sampling settings (each repeat its own seed)."""
    if not r.sampling:
        return r.generation_limit
    sampling = dict(r.sampling)
    if "seed" in sampling:
        sampling["seed"] = int(sampling["seed"]) + r.repeat
    return r.generation_limit, sampling


def _engine_max_len(llm) -> int | None:
    for path in (("llm_engine", "model_config"), ("llm_engine", "vllm_config", "model_config")):
        obj = llm
        try:
            for attr in path:
                obj = getattr(obj, attr)
            return int(obj.max_model_len)
        except (AttributeError, TypeError, ValueError):
            continue
    return None


def _dp_worker(conn, engine_kwargs: dict, devices: str) -> None:
    """One data-parallel engine in its own process, on its own GPUs."""
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        vllm = import_vllm()
        llm = vllm.LLM(**engine_kwargs)
        conn.send(("ready", _engine_max_len(llm)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            return
        try:
            conn.send(("ok", run_llm(llm, vllm, *msg)))
        except BaseException as e:  # noqa: BLE001
            conn.send(("error", f"{type(e).__name__}: {e}"))


class VLLMBackend:
    name = "vllm"
    capabilities = frozenset({"generate", "prompt_logprobs"})

    def __init__(
        self,
        *,
        model: str,
        truncation: str = "refuse",
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        data_parallel_size: int = 1,
        max_model_len: int = 0,
        gpu_memory_utilization: float = 0.9,
        enable_prefix_caching: bool = True,
        enable_chunked_prefill: bool = True,
        rope_scaling: str | dict | None = None,
        hf_overrides: dict | str | None = None,
        dtype: str = "auto",
        max_num_seqs: int = 0,
        max_num_batched_tokens: int = 0,
        enforce_eager: bool = False,
        seed: int = 0,
        kv_cache_dtype: str = "auto",
        engine_args: dict | str | None = None,
        batch_size: int = 512,
    ):
        from ctxbench.harness.core.models import load_tokenizer, materialize, resolve

        vllm = import_vllm()  # fail before any slow work
        self.ref = resolve(model)
        self.path = materialize(self.ref)
        config = model_config(self.path, model)
        self.tokenizer = load_tokenizer(model)
        self.truncation = truncation
        self.dp = int(data_parallel_size)
        if self.dp < 1:
            raise ConfigError("backend_args.data_parallel_size: must be >= 1")
        self.engine_kwargs = build_engine_kwargs(
            self.path, config=config, tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
            max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
            enable_prefix_caching=flag(enable_prefix_caching, "enable_prefix_caching"),
            enable_chunked_prefill=flag(enable_chunked_prefill, "enable_chunked_prefill"), rope_scaling=rope_scaling,
            hf_overrides=json_object(hf_overrides, "hf_overrides"), dtype=dtype, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, enforce_eager=flag(enforce_eager, "enforce_eager"), seed=seed,
            kv_cache_dtype=kv_cache_dtype, engine_args=json_object(engine_args, "engine_args"),
        )
        self.batch_size = int(batch_size)
        # every device the engines hold while a generate call runs (GPU-seconds = its wall time x these)
        self.devices = self.dp * self.engine_kwargs["tensor_parallel_size"] * self.engine_kwargs["pipeline_parallel_size"]
        self.vllm = vllm
        self.version = getattr(vllm, "__version__", "?")
        self.stop_ids = stop_ids(self.path, config, self.tokenizer)
        self.llm = None
        self.workers: list = []
        engine_len = self._start()
        self.context_length = int(engine_len or self.engine_kwargs.get("max_model_len")
                                  or config.get("max_position_embeddings") or 1 << 30)

    def _start(self) -> int | None:
        if self.dp == 1:
            self.llm = self.vllm.LLM(**self.engine_kwargs)
            return _engine_max_len(self.llm)
        import multiprocessing as mp

        per = self.engine_kwargs["tensor_parallel_size"] * self.engine_kwargs["pipeline_parallel_size"]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible:
            devices = [d.strip() for d in visible.split(",") if d.strip()]
        else:
            import torch

            devices = [str(i) for i in range(torch.cuda.device_count())]
        if len(devices) < per * self.dp:
            raise ConfigError(f"backend_args.data_parallel_size: {self.dp} engines x {per} GPUs each need {per * self.dp} GPUs; "
                              f"{len(devices)} visible")
        ctx = mp.get_context("spawn")
        lens = []
        for rank in range(self.dp):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_dp_worker, args=(child, self.engine_kwargs, ",".join(devices[rank * per:(rank + 1) * per])),
                               daemon=True)
            proc.start()
            self.workers.append((proc, parent))
        for rank, (proc, conn) in enumerate(self.workers):
            kind, value = conn.recv()
            if kind != "ready":
                self.close()
                raise RuntimeError(f"vllm data-parallel engine {rank} failed to start: {value}")
            lens.append(value)
        return min((x for x in lens if x), default=None)

    def close(self) -> None:
        for proc, conn in self.workers:
            try:
                conn.send(None)
            except OSError:
                pass
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
        self.workers = []

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def info(self) -> dict[str, Any]:
        kw = self.engine_kwargs
        return {
            "model": self.ref.name,
            "path": self.path,
            "vllm": self.version,
            "tensor_parallel_size": kw["tensor_parallel_size"],
            "pipeline_parallel_size": kw["pipeline_parallel_size"],
            "data_parallel_size": self.dp,
            "max_model_len": self.context_length,
            "gpu_memory_utilization": kw["gpu_memory_utilization"],
            "enable_prefix_caching": kw["enable_prefix_caching"],
            "enable_chunked_prefill": kw["enable_chunked_prefill"],
            "hf_overrides": kw.get("hf_overrides", {}),
            "dtype": kw["dtype"],
            "engine_args": {k: v for k, v in kw.items() if k not in ("model", "tokenizer")},
            "decoding": "greedy",
            "ordering": "prefix (lexicographic token ids)",
        }

    def encode(self, requests: list[Request]) -> tuple[list[list[int]], list[int]]:
        """Token ids exactly as the HF backend feeds them (after the truncation policy), and tokens cut."""
        ids, cut = [], []
        for r in requests:
            x = self.tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"]
            x, n = apply_truncation(x, max_new_tokens=r.generation_limit, context_length=self.context_length,
                                    policy=self.truncation, sample_id=r.sample_id)
            ids.append(list(x))
            cut.append(n)
        return ids, cut

    def generate(self, requests: list[Request]) -> list[Prediction]:
        if not requests:
            return []
        ids, cut = self.encode(requests)
        order = prefix_order(ids)
        runs = split_balanced(order, [len(x) for x in ids], self.dp)
        start = time.perf_counter()
        results: dict[int, tuple] = {}
        if self.dp == 1:
            outs = run_llm(self.llm, self.vllm, [ids[i] for i in order], [_limit(requests[i]) for i in order], self.stop_ids)
            results.update(zip(order, outs))
        else:
            for (_proc, conn), run in zip(self.workers, runs):
                if run:
                    conn.send(([ids[i] for i in run], [_limit(requests[i]) for i in run], self.stop_ids))
            for (_proc, conn), run in zip(self.workers, runs):
                if run:
                    kind, value = conn.recv()
                    if kind != "ok":
                        raise RuntimeError(f"vllm data-parallel engine failed: {value}")
                    results.update(zip(run, value))
        seconds = time.perf_counter() - start  # GPU-seconds: this wall time x every device of every engine (its share)
        self.last_cached_tokens = sum(r[2] or 0 for r in results.values())
        stop = set(self.stop_ids)
        preds = []
        for i, r in enumerate(requests):
            toks = results[i][0][: r.generation_limit]
            n = next((j for j, t in enumerate(toks) if t in stop), len(toks))
            text = self.tokenizer.decode(toks[:n], skip_special_tokens=not r.thinking)  # channel markers kept
            preds.append(Prediction(r.sample_id, text, len(ids[i]), n, seconds / len(requests), truncated_tokens=cut[i], timing="batch-share",
                                    cached_tokens=results[i][2], gpu_seconds=seconds / len(requests) * self.devices))
        return preds

    def token_logprobs(self, requests: list[LogprobRequest]) -> list[TokenLogprobs]:
        """log P(ids[i] | ids[:i]) of each window's scored tokens, from vLLM's prompt_logprobs (one generated token,
        discarded). vLLM always includes the prompt token itself among a position's logprobs, ranked or not."""
        if self.dp != 1:
            raise ConfigError("backend_args.data_parallel_size: prompt log-probabilities run on one engine; use 1 "
                              "(or split the suite with --shard i/n)")
        for r in requests:
            check_window(r, self.context_length)
        if not requests:
            return []
        params = self.vllm.SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=1, detokenize=False)
        start = time.perf_counter()
        outputs = self.llm.generate([_tokens_prompt(self.vllm, list(r.token_ids)) for r in requests],
                                    [params] * len(requests), use_tqdm=False)
        seconds = (time.perf_counter() - start) / len(requests)
        out = []
        for r, o in zip(requests, outputs):
            plp = getattr(o, "prompt_logprobs", None)
            if plp is None or len(plp) < len(r.token_ids):
                raise RuntimeError(f"{r.sample_id}: vLLM returned no prompt logprobs for the window")
            values = tuple(_prompt_logprob(plp[i], r.token_ids[i]) for i in range(r.score_from, len(r.token_ids)))
            out.append(TokenLogprobs(r.sample_id, values, seconds))
        return out


def _prompt_logprob(entry: Any, token: int) -> float:
    """The log-probability of `token` at one position of vLLM's prompt_logprobs ({token id: Logprob})."""
    value = entry[token]
    return float(getattr(value, "logprob", value))
