"""The packing-method registry: method name -> (argument model, builder).

Kept apart from harness.registry on purpose: its "trainer" kind lists trainers, while these are data
recipes a trainer consumes. Method modules register themselves when `_load()` imports them.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.errors import ConfigError

_MODULES = ("trainers.data.packing", "trainers.data.splice", "trainers.data.quest", "trainers.data.baselines")


@dataclass(frozen=True)
class MethodSpec:
    name: str
    args: type[BaseModel]  # pydantic model of method_args (extra=forbid)
    build: Callable[..., Any]  # build(*, corpus, framer, args, seed, workdir) -> Packer
    help: str


METHODS: dict[str, MethodSpec] = {}


def register_method(name: str, args: type[BaseModel]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in METHODS and METHODS[name].build is not fn:
            raise ValueError(f"packing method {name!r} is registered twice")
        METHODS[name] = MethodSpec(name, args, fn, (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return deco


def _load() -> None:
    for mod in _MODULES:
        importlib.import_module(mod)


def method_names() -> list[str]:
    _load()
    return sorted(METHODS)


def get_method(name: str) -> MethodSpec:
    _load()
    if name not in METHODS:
        close = difflib.get_close_matches(name, METHODS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(METHODS))}"
        raise ConfigError(f"method: unknown packing method {name!r}; {hint}")
    return METHODS[name]


def parse_args(name: str, raw: dict[str, Any]) -> BaseModel:
    """Validate method_args against the method's model; errors name the key and the fix."""
    from harness.config import one_line

    spec = get_method(name)
    try:
        return spec.args(**(raw or {}))
    except ValidationError as e:
        raise ConfigError(one_line(e, f"method_args ({name})")) from None
