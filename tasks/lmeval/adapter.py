"""lm-evaluation-harness over ctxbench backends.

* ``CtxbenchLM``: lm-eval's ``LM`` interface (loglikelihood, loglikelihood_rolling, generate_until) over any
  ctxbench backend. Log-likelihoods need a backend with ``loglikelihood``/``loglikelihood_rolling`` (hf has them);
  generation works with every backend.
* ``evaluate``: run lm-eval tasks (``lm_eval.simple_evaluate``, samples logged) through a backend.
Reading its results back (store rows, aggregates) is tasks/lmeval/results.py.

Importing this module is cheap: lm_eval is imported only when used (``CtxbenchLM`` is built on first access).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

from ctxbench.harness.core.errors import ConfigError


def __getattr__(name: str):
    if name == "CtxbenchLM":
        return _lm_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _lm_class():
    """CtxbenchLM: lm-eval's ``LM`` with the methods of ``_OverBackend``."""
    from lm_eval.api.model import LM

    class CtxbenchLM(_OverBackend, LM):
        __doc__ = _OverBackend.__doc__

    return CtxbenchLM


class _OverBackend:
    """The methods of lm-eval's ``LM`` over a ctxbench backend (an object, or built from ``model`` + ``backend`` name
    + args), kept apart from ``LM`` so lm-eval is imported only when the class is asked for (``_lm_class``).

    Decoding is greedy whatever a task's generation_kwargs ask; prompts are sent as lm-eval renders them
    (lm-eval applies the chat template itself when run with apply_chat_template).
    """

    def __init__(self, backend: Any = None, *, model: str | None = None, backend_name: str = "hf",
                 batch_size: int | str | None = None, max_batch_size: int | None = None, device: str | None = None,
                 **backend_args: Any):
        super().__init__()
        if backend is None or isinstance(backend, str):
            from ctxbench.harness.core import registry

            backend_name = backend if isinstance(backend, str) else backend_name
            if not model:
                raise ConfigError("model: CtxbenchLM needs a backend object or model=<alias, dir or hub id>")
            if device is not None:
                backend_args.setdefault("device", device)
            if batch_size not in (None, "auto") and backend_name == "hf":
                backend_args.setdefault("batch_size", int(batch_size))
            backend = registry.get("backend", backend_name, field="backend")(model=model, **backend_args)
        self.backend = backend
        self.tokenizer = backend.tokenizer

    # -- scoring ----------------------------------------------------------------------------------
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        fn = self._need("loglikelihood")
        out = [(float(ll), bool(g)) for ll, g in fn([tuple(r.args) for r in requests])]
        for r, o in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood", r.args, o)
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        fn = self._need("loglikelihood_rolling")
        out = [float(x) for x in fn([r.args[0] for r in requests])]
        for r, o in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, o)
        return out

    def _need(self, method: str):
        if "loglikelihood" not in getattr(self.backend, "capabilities", frozenset()):
            raise ConfigError(
                f"backend {getattr(self.backend, 'name', '?')!r}: cannot compute log-likelihoods, which lm-eval "
                "multiple-choice and perplexity tasks need; use the hf backend, or generative tasks only"
            )
        return getattr(self.backend, method)

    # -- generation -------------------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        from ctxbench.harness.core.types import Request

        reqs, stops = [], []
        for i, r in enumerate(requests):
            context, kwargs = r.args
            kwargs = dict(kwargs or {})
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(kwargs.get("max_gen_toks") or kwargs.get("max_new_tokens") or 256)
            reqs.append(Request(f"lmeval#{i}", context, max_new, add_special_tokens=not self._starts_with_bos(context),
                                user_text=context))
            stops.append(until)
        out = []
        preds = self.backend.generate(reqs)
        for r, p, until in zip(requests, preds, stops):
            if p.error:
                raise RuntimeError(f"backend failed on an lm-eval request: {p.error}")
            text = p.text
            for stop in until:
                if stop:
                    text = text.split(stop)[0]
            out.append(text)
            self.cache_hook.add_partial("generate_until", r.args, text)
        return out

    def _starts_with_bos(self, text: str) -> bool:
        bos = getattr(self.tokenizer, "bos_token", None)
        return bool(bos) and text.startswith(bos)

    # -- chat templates ---------------------------------------------------------------------------
    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(chat_history, tokenize=False, add_generation_prompt=add_generation_prompt,
                                                  continue_final_message=not add_generation_prompt)

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name_or_path", "")).replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return getattr(self.tokenizer, "chat_template", None) if chat_template else None

    def get_model_info(self) -> dict:
        info = self.backend.info() if hasattr(self.backend, "info") else {}
        return {"ctxbench_backend": getattr(self.backend, "name", "?"), **{f"ctxbench_{k}": v for k, v in info.items()}}


# ---- running lm-eval ------------------------------------------------------------------------------


@functools.cache
def _task_manager(include_path: tuple[str, ...], metadata: str, include_defaults: bool):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(include_path) or None, metadata=json.loads(metadata) or None,
                       include_defaults=include_defaults)


def task_manager(include_path: str | list[str] | None = None, metadata: dict | None = None, include_defaults: bool = True):
    """lm-eval's TaskManager, cached per arguments: indexing lm-eval's ~15k builtin task YAMLs takes seconds.

    include_defaults=False indexes only include_path (fast; enough for exported ctxbench tasks)."""
    paths = [include_path] if isinstance(include_path, (str, Path)) else list(include_path or [])
    for p in paths:
        if not Path(p).is_dir():
            raise ConfigError(f"include_path: {p} is not a directory of lm-eval task YAMLs")
    if not paths and not include_defaults:
        raise ConfigError("include_path: needed when lm-eval's builtin tasks are left out")
    return _task_manager(tuple(str(Path(p).resolve()) for p in paths), json.dumps(metadata or {}, sort_keys=True),
                         include_defaults)


def check_tasks(names: list[str], manager) -> None:
    import difflib

    known = set(manager.all_tasks)
    for n in names:
        if n not in known:
            close = difflib.get_close_matches(n, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; list them with `lm_eval ls tasks`, or add --include-path"
            raise ConfigError(f"tasks: lm-eval has no task, group or tag {n!r}{hint}")


def evaluate(backend: Any, tasks: list[str], *, num_fewshot: int | None = None, limit: int | float | None = None,
             include_path: str | list[str] | None = None, seed: int = 42, apply_chat_template: bool = False,
             fewshot_as_multiturn: bool = False, system_instruction: str | None = None, gen_kwargs: str | None = None,
             bootstrap_iters: int = 100000, metadata: dict | None = None, include_defaults: bool = True) -> dict[str, Any]:
    """Run lm-eval tasks (names of tasks, groups or tags) through a ctxbench backend; samples are logged.

    Seeds (python, numpy, torch, few-shot sampler) are all ``seed``. Returns lm-eval's results dict, plus
    ``seconds`` (wall time of the evaluation).
    """
    import lm_eval

    if not tasks:
        raise ConfigError("tasks: name at least one lm-eval task, e.g. mmlu or arc_easy")
    meta = {"pretrained": str(getattr(backend, "path", "") or getattr(backend.tokenizer, "name_or_path", ""))}
    manager = task_manager(include_path, {**meta, **(metadata or {})}, include_defaults)
    check_tasks(tasks, manager)
    lm = _lm_class()(backend)
    start = time.perf_counter()
    results = lm_eval.simple_evaluate(
        model=lm, tasks=list(tasks), num_fewshot=num_fewshot, limit=limit, bootstrap_iters=bootstrap_iters,
        log_samples=True, task_manager=manager, apply_chat_template=apply_chat_template,
        fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction, gen_kwargs=gen_kwargs,
        random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed, fewshot_random_seed=seed,
    )
    results["seconds"] = time.perf_counter() - start
    results["requested"] = list(tasks)
    return results
