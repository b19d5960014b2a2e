"""Backends. Each factory imports its heavy stack (torch, vllm, httpx) only when it is built."""

from __future__ import annotations

from ctxbench.harness.core.registry import register


@register("backend", "hf")
def hf(**kwargs):
    from ctxbench.harness.backends.hf import HFBackend

    return HFBackend(**kwargs)


@register("backend", "echo")
def echo(**kwargs):
    from ctxbench.harness.backends.echo import EchoBackend

    return EchoBackend(**kwargs)
