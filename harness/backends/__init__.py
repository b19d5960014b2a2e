"""Backends. Each factory checks its arguments (backends/args.py) first, then imports its heavy stack (torch,
vllm, httpx) only when it is built."""

from __future__ import annotations

from ctxbench.harness.backends.args import EchoArgs, HFArgs
from ctxbench.harness.core.backend import parse_backend_args
from ctxbench.harness.core.extras import require_extra
from ctxbench.harness.core.registry import register


@register("backend", "hf", args=HFArgs, samples=True, distributions=("torch", "transformers"))
def hf(*, model: str, truncation: str = "refuse", **kwargs):
    args = parse_backend_args(HFArgs, kwargs, backend="hf")
    require_extra("hf", for_="backend hf")
    from ctxbench.harness.backends.hf import HFBackend

    return HFBackend(model=model, truncation=truncation, **args.model_dump())


def hf_plan(*, model: str, truncation: str = "refuse", **kwargs):
    """The light view the plan step checks against (tokenizer, context from the config); build() loads weights."""
    args = parse_backend_args(HFArgs, kwargs, backend="hf")
    require_extra("hf", for_="backend hf")
    from ctxbench.harness.backends.hf import HFPlan

    return HFPlan(model=model, truncation=truncation, **args.model_dump())


hf.plan = hf_plan  # type: ignore[attr-defined]


@register("backend", "echo", args=EchoArgs, samples=True, model_free=True)
def echo(*, model: str, truncation: str = "refuse", **kwargs):
    args = parse_backend_args(EchoArgs, kwargs, backend="echo")
    from ctxbench.harness.backends.echo import EchoBackend

    return EchoBackend(model=model, **args.model_dump())
