"""One decorator registry for tasks, backends, trainers and metrics.

Factories are registered by name and built on demand, so heavy imports (torch, vllm) happen inside
factories, only when that entry is used. Configs name registry entries, never import paths.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from harness.errors import ConfigError

KINDS = ("task", "backend", "metric", "trainer")
_REGISTRY: dict[str, dict[str, Callable[..., Any]]] = {k: {} for k in KINDS}

# Packages whose modules register entries on import; every module below them is imported (once).
# Cheap by contract: a module never imports torch, vllm or other heavy stacks at module level.
_PROVIDERS = {
    "task": ["tasks"],
    "backend": ["harness.backends"],
    "metric": ["harness.metrics", "tasks"],
    "trainer": ["trainers"],
}
_LOADED: set[str] = set()


def register(kind: str, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    if kind not in _REGISTRY:
        raise ValueError(f"unknown registry kind {kind!r}")

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY[kind] and _REGISTRY[kind][name] is not fn:
            raise ValueError(f"{kind} {name!r} is registered twice")
        _REGISTRY[kind][name] = fn
        return fn

    return deco


def _load(kind: str) -> None:
    for name in _PROVIDERS[kind]:
        if name in _LOADED:
            continue
        _LOADED.add(name)
        mod = importlib.import_module(name)
        if hasattr(mod, "__path__"):  # a package: import every module below it
            for info in pkgutil.walk_packages(mod.__path__, prefix=name + "."):
                if not info.name.rsplit(".", 1)[-1].startswith("_"):
                    importlib.import_module(info.name)


def names(kind: str) -> list[str]:
    _load(kind)
    return sorted(_REGISTRY[kind])


def get(kind: str, name: str, *, field: str | None = None) -> Callable[..., Any]:
    _load(kind)
    if name not in _REGISTRY[kind] and ":" in name and name.split(":", 1)[0] in _REGISTRY[kind]:
        base, rest = name.split(":", 1)  # e.g. lmeval:<model_type> for types without their own entry
        return functools.partial(_REGISTRY[kind][base], model_type=rest)
    try:
        return _REGISTRY[kind][name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY[kind], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(_REGISTRY[kind]))}"
        raise ConfigError(f"{field or kind}: unknown {kind} {name!r}{hint}") from None
