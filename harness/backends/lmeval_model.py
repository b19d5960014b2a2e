"""Any lm-evaluation-harness model as a ctxbench backend (`--backend lmeval:<model_type>`).

The LM is built with `lm_eval.api.registry.get_model(model_type).create_from_arg_string(arg_string,
additional_config)` and asked for `generate_until` with our rendered prompts, `until=[]` (lm-eval adds
the model's EOS) and `max_gen_toks` = the sample's budget, greedy (`do_sample=False, temperature=0`).

Names: one entry, `lmeval`; `--backend lmeval:<type>` is it with `model_type=<type>` (the registry reads any
`NAME:<rest>` as NAME's entry with model_type=rest), so every type lm-eval knows works, its own registry being the
list (`--backend lmeval --backend-arg model_type=<type>` says the same).

Argument mapping (`--backend-arg KEY=VALUE`, values JSON-typed by the CLI):
    --model M          -> `pretrained=<local dir of M>` for weight-loading types (hf, vllm, sglang, ...): aliases and
                          GGUF files are materialized first; -> `model=M` for API types (local-completions, ...)
    tokenizer=T        ctxbench's tokenizer for building prompts (default: M); API types also get tokenizer=<its dir>
    context_length=N   the context we check prompts against (default: the LM's max_length); also passed to the
                       LM as max_length (max_model_len for vllm)
    chunk_size=N       requests per generate_until call (the runner's batch; default 64)
    model_type=TYPE    only with plain `--backend lmeval`
    everything else    passed through unchanged as a keyword of the lm-eval model's constructor
                       (e.g. batch_size=8, device=cpu, dtype=float32, base_url=..., tokenized_requests=false,
                       num_concurrent=4, gpu_memory_utilization=0.8)
Prompts are length-checked here first (lm-eval would silently left-truncate them).

Chat-completions types get messages: the task text as the user turn, with the answer prefix appended to
it (lm-eval's chat payload cannot continue an assistant message); info() records that.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ctxbench.harness.backends.args import LMEvalArgs
from ctxbench.harness.core.backend import apply_truncation, parse_backend_args
from ctxbench.harness.core.errors import ConfigError, CtxbenchError
from ctxbench.harness.core.extras import extra_error, require_extra
from ctxbench.harness.core.registry import register
from ctxbench.harness.core.types import Prediction, Request

API_TYPES = {"local-completions", "local-chat-completions", "openai-completions", "openai-chat-completions",
             "anthropic-completions", "anthropic-chat", "anthropic-chat-completions", "litellm", "litellm-chat",
             "litellm-chat-completions", "azure-openai-chat-completions", "watsonx_llm", "textsynth", "gguf", "ggml"}
HF_TYPES = {"hf", "hf-auto", "huggingface", "steered"}
OWN_KEYS = ("tokenizer", "context_length", "chunk_size", "model_type")


def lmeval(*, model: str, truncation: str = "refuse", **kwargs):
    args = parse_backend_args(LMEvalArgs, kwargs, backend="lmeval")
    require_extra("lmeval", for_="backend lmeval")
    return LMEvalBackend(model=model, truncation=truncation, **args.model_dump())


# greedy only (lm-eval's gen_kwargs are its own); no thinking budget or reasoning split: lm-eval's model generates
register("backend", "lmeval", args=LMEvalArgs, distributions=("lm_eval",), thinking=False)(lmeval)


def split_backend_name(name: str) -> tuple[str, dict[str, Any]]:
    """`lmeval:<type>` -> ("lmeval", {"model_type": type}); other names unchanged. For the runner/CLI."""
    if name.startswith("lmeval:"):
        return "lmeval", {"model_type": name.split(":", 1)[1]}
    return name, {}


def lm_arguments(model_type: str, model: str, path: str | None, tokenizer_path: str | None, context_length: int,
                 passthrough: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(arg_string, additional_config) for create_from_arg_string. Typed values go in additional_config."""
    extra = dict(passthrough)
    key, value = ("model", model) if model_type in API_TYPES else ("pretrained", path or model)
    arg_string = ""
    if key not in extra:
        if "," in value or "=" in value:
            extra[key] = value  # cannot be written as key=value in an arg string
        else:
            arg_string = f"{key}={value}"
    if model_type in API_TYPES and tokenizer_path:
        extra.setdefault("tokenizer", tokenizer_path)
        extra.setdefault("tokenizer_backend", "huggingface")
    if context_length:
        extra.setdefault("max_model_len" if model_type == "vllm" else "max_length", int(context_length))
    if model_type in HF_TYPES and "device" not in extra:
        try:
            import torch

            extra["device"] = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            pass
    return arg_string, extra


class LMEvalBackend:
    name = "lmeval"
    capabilities = frozenset({"generate"})

    def __init__(self, *, model: str, model_type: str = "", truncation: str = "refuse", tokenizer: str | None = None,
                 context_length: int = 0, chunk_size: int = 64, **lm_args: Any):
        if not model_type:
            raise ConfigError("backend_args.model_type: name the lm-eval model type, e.g. --backend lmeval:hf "
                              "or --backend lmeval --backend-arg model_type=local-completions")
        try:
            from lm_eval.api.registry import get_model
        except ImportError as e:  # installed but broken: name the module that failed
            raise extra_error("lmeval", for_="backend lmeval", missing=e.name) from None
        from ctxbench.harness.core.models import load_tokenizer, materialize, resolve

        self.model_type = model_type
        self.model = model
        self.truncation = truncation
        self.batch_size = int(chunk_size)
        self.chat = "chat" in model_type
        try:
            cls = get_model(model_type)
        except ValueError:
            cls = None
        if cls is None:  # get_model imports lm_eval.models only while its registry is empty
            try:
                import lm_eval.models  # noqa: F401

                cls = get_model(model_type)
            except ValueError:
                cls = None
        if cls is None:
            raise ConfigError(f"backend: lm-eval has no model type {model_type!r}; see `lm_eval --model` choices")

        local_path = None
        if model_type not in API_TYPES:
            local_path = materialize(resolve(model))
        self.tokenizer_spec = tokenizer or model
        try:
            self.tokenizer = load_tokenizer(self.tokenizer_spec)
        except CtxbenchError as e:
            raise ConfigError(f"backend_args.tokenizer: {e}; pass --backend-arg tokenizer=<alias, dir or hub id>") from None
        try:
            tok_path = materialize(resolve(self.tokenizer_spec))
        except CtxbenchError:
            tok_path = self.tokenizer_spec
        self.arg_string, self.lm_config = lm_arguments(model_type, model, local_path, tok_path, int(context_length), lm_args)
        try:
            self.lm = cls.create_from_arg_string(self.arg_string, self.lm_config)
        except TypeError as e:
            raise ConfigError(f"backend_args: lm-eval model {model_type!r} rejected the arguments: {e}") from None
        except ModuleNotFoundError as e:  # lm-eval's API models need its [api] extra
            raise extra_error("lmeval", for_=f"backend lmeval:{model_type}", missing=e.name) from None
        self.context_length = int(context_length or _lm_max_length(self.lm) or 0)
        if not self.context_length:
            raise ConfigError("backend_args.context_length: the lm-eval model does not state its max length; pass context_length=N")

    def info(self) -> dict[str, Any]:
        secret = ("key", "secret", "password", "auth", "header")
        safe = {k: v for k, v in self.lm_config.items() if not any(w in k.lower() for w in secret)}
        return {
            "model": self.model,
            "lm_eval_model_type": self.model_type,
            "lm_eval_model_args": self.arg_string,
            "lm_eval_args": safe,
            "lm_eval": _version(),
            "tokenizer": self.tokenizer_spec,
            "context_length": self.context_length,
            "answer_prefix": "appended to the user turn" if self.chat else "in the raw prompt",
            "decoding": "greedy",
        }

    def _context(self, r: Request) -> tuple[Any, int, int]:
        """(context for generate_until, prompt tokens, tokens cut) after the truncation policy."""
        if self.chat:
            from lm_eval.models.api_models import JsonChatStr

            user = r.user_text + ("\n" + r.answer_prefix.strip() if r.answer_prefix else "")
            messages = [{"role": "user", "content": user}]
            n = len(self.tokenizer(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                                   add_special_tokens=False)["input_ids"])
            apply_truncation(range(n), max_new_tokens=r.max_new_tokens, context_length=self.context_length,
                             policy="refuse", sample_id=r.sample_id)  # chat prompts are not cut here
            return JsonChatStr(json.dumps(messages)), n, 0
        ids = self.tokenizer(r.prompt, add_special_tokens=r.add_special_tokens)["input_ids"]
        kept, cut = apply_truncation(ids, max_new_tokens=r.max_new_tokens, context_length=self.context_length,
                                     policy=self.truncation, sample_id=r.sample_id)
        return (self.tokenizer.decode(kept) if cut else r.prompt), len(kept), cut

    def generate(self, requests: list[Request]) -> list[Prediction]:
        from lm_eval.api.instance import Instance

        contexts = [self._context(r) for r in requests]
        instances = [
            Instance(request_type="generate_until", doc={}, idx=i,
                     arguments=(ctx, {"until": [], "max_gen_toks": r.max_new_tokens, "do_sample": False, "temperature": 0.0}))
            for i, (r, (ctx, _, _)) in enumerate(zip(requests, contexts))
        ]
        start = time.perf_counter()
        texts = self.lm.generate_until(instances, disable_tqdm=True)
        seconds = (time.perf_counter() - start) / max(len(requests), 1)
        out = []
        for r, (_, n, cut), text in zip(requests, contexts, texts):
            text = text or ""
            gen = len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0
            out.append(Prediction(r.sample_id, text, n, gen, seconds, truncated_tokens=cut))
        return out


def _lm_max_length(lm) -> int:
    try:
        return int(lm.max_length)
    except Exception:  # noqa: BLE001 - some LMs compute it lazily and may fail without a model config
        return 0


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("lm_eval")
    except metadata.PackageNotFoundError:
        return "?"
