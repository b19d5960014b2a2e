"""Packing methods in the one ctxbench registry (kind "packing", and each also a "synthesis" method): name -> (argument
model, builder, help).

A method module decorates its builder with `register_method(name, Args)`; configs name the method and the
registry finds it (plugins can add methods the same way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from ctxbench.harness.core import registry
from ctxbench.trainers.data.method_args import (  # noqa: F401 - get_method, parse_args: re-exported
    PackingMethod,
    get_method,
    parse_args,
    require_method_extras,
)


def register_method(name: str, args: type[BaseModel]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        spec = PackingMethod(name, args, fn, (fn.__doc__ or "").strip().split("\n")[0])
        registry.register("packing", name)(spec)
        _register_synthesis(spec)
        return fn

    return deco


def _register_synthesis(spec: PackingMethod) -> None:
    """Every packing method is also a synthesis method (config: SynthesisConfig with `method: <name>`); its steps live
    in the pipeline, imported on first use."""
    from ctxbench.trainers.data.pack_config import SynthesisConfig
    from ctxbench.trainers.data.synthesis import register_synthesis

    def pipeline(step: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            from ctxbench.trainers.data import pipeline as module

            return getattr(module, step)(*args, **kwargs)
        return call

    register_synthesis(spec.name, SynthesisConfig, identity=pipeline("pack_identity"), load=pipeline("shards_manifest"),
                       args=spec.args, help=f"packing: {spec.help}", produces="packed", trainer="cpt")(pipeline("_pack"))


def method_names() -> list[str]:
    return registry.names("packing")
