"""One decorator registry for tasks, backends, metrics, trainers, packing and synthesis methods, and plugins' suites.

Factories are registered by name and built on demand, so heavy imports (torch, vllm) happen inside
factories, only when that entry is used. Configs name registry entries, never import paths.

Entries come from ctxbench's own provider packages (every module below them is imported once, on the
first lookup of that kind) and from third-party plugins: any installed distribution may declare

    [project.entry-points."ctxbench.plugins"]
    my_plugin = "my_package.ctxbench_plugin"

and that module is imported on the first lookup of any kind; its `@register(...)` decorators add its entries.
A plugin that fails to import (an exception, sys.exit, KeyboardInterrupt) or registers a name that ctxbench or
another plugin already has is unloaded whole (none of its entries stay) and reported in one warning line naming
the distributions involved, in every command: ctxbench's own entries of a kind are imported before a plugin's
first entry of that kind. One broken plugin never breaks ctxbench.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import pkgutil
import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

from ctxbench.harness.core.errors import ConfigError

KINDS = ("task", "backend", "metric", "trainer", "packing", "synthesis", "suite")
PLUGIN_GROUP = "ctxbench.plugins"
_REGISTRY: dict[str, dict[str, Callable[..., Any]]] = {k: {} for k in KINDS}
_NOUN = {"packing": "packing method", "synthesis": "synthesis method"}  # how errors name an entry of each kind

# Packages whose modules register entries on import; every module below them is imported (once).
# Cheap by contract: a module never imports torch, vllm or other heavy stacks at module level.
# Named by string: the core discovers them at run time and never imports them statically.
_PROVIDERS = {
    "task": ["ctxbench.tasks"],
    "backend": ["ctxbench.harness.backends"],
    "metric": ["ctxbench.harness.core.metrics", "ctxbench.tasks"],
    "trainer": ["ctxbench.trainers"],
    "packing": ["ctxbench.trainers.data"],
    "synthesis": ["ctxbench.trainers.data", "ctxbench.trainers.hqa.data", "ctxbench.trainers.logo.data"],
    "suite": [],  # shipped suites are files (tasks/<family>/suites, configs/suites); a plugin's entry returns its YAML's path
}
_LOADED: set[str] = set()
_PLUGINS: dict[str, str] = {}  # entry-point name -> module, of the plugins that loaded


@dataclasses.dataclass(frozen=True)
class PluginOrigin:
    """Which installed distribution registered an entry: what a record names so a number can be traced to it."""

    entry_point: str
    distribution: str
    version: str


_INFO: dict[tuple[str, str], dict[str, Any]] = {}  # (kind, name) -> what the entry declared at registration
_ORIGINS: dict[tuple[str, str], PluginOrigin] = {}  # (kind, name) -> the plugin that registered it
_LOADING: list[PluginOrigin] = []  # the plugin being imported now (its decorators run during the import)


def register(kind: str, name: str, **info: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a factory under (kind, name); `info` is what an entry declares about itself, its traits (TRAITS: a
    backend's Args model, sampling support and distributions, a task's Args and version, a metric's scale and direction,
    a synthesis method's data and trainer). Every check and listing reads them from here (backend_traits, ...)."""
    if kind not in _REGISTRY:
        raise ValueError(f"unknown registry kind {kind!r}; kinds: {', '.join(KINDS)}")
    _check_traits(kind, name, info)

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        plugin = _LOADING[-1] if _LOADING and not str(getattr(fn, "__module__", "")).startswith("ctxbench.") else None
        if plugin is not None:
            _own_first(kind)  # ctxbench's own entries of this kind are in before a plugin's: a clash shows now
        if name in _REGISTRY[kind] and _REGISTRY[kind][name] is not fn:
            _clash(kind, name, plugin)
        _REGISTRY[kind][name] = fn
        if info:
            _INFO[(kind, name)] = dict(info)
        if plugin is not None:
            _ORIGINS[(kind, name)] = plugin
        return fn

    return deco


class PluginClash(ValueError):
    """A plugin registers a name that is taken: the plugin is unloaded, the entry that was there stays."""


def _who(origin: PluginOrigin | None) -> str:
    if origin is None:
        return "ctxbench"
    return f"plugin {origin.distribution}" + (f" {origin.version}" if origin.version else "") + f" ({origin.entry_point})"


def _own_first(kind: str) -> None:
    """Import ctxbench's own providers of `kind` (while a plugin imports: their entries are ctxbench's, not its)."""
    saved = _LOADING[:]
    _LOADING.clear()
    try:
        for provider in _PROVIDERS[kind]:
            _import_tree(provider)
    finally:
        _LOADING[:] = saved


def _clash(kind: str, name: str, now: PluginOrigin | None) -> None:
    """A second registration of (kind, name). A plugin importing now (or after an earlier plugin took the name) is
    refused: PluginClash, caught by _load_plugins, which unloads it. ctxbench's own module registering a name a
    plugin imported earlier took: that plugin is unloaded and ctxbench's entry goes in. Two of ctxbench's own: a bug."""
    was = _ORIGINS.get((kind, name))
    what = f"{_NOUN.get(kind, kind)} {name!r}"
    if now is not None:
        raise PluginClash(f"it registers {what}, which {_who(was)} already registers")
    if was is not None:
        _unload(was, f"it registers {what}, which {_who(None)} already registers")
        return
    raise ValueError(f"{kind} {name!r} is registered twice")


def _unload(origin: PluginOrigin, why: str) -> None:
    """Remove every entry a plugin registered (a plugin is loaded whole or not at all) and say why in one line."""
    for key in [k for k, o in _ORIGINS.items() if o.entry_point == origin.entry_point]:
        _REGISTRY[key[0]].pop(key[1], None)
        _INFO.pop(key, None)
        _ORIGINS.pop(key, None)
    _PLUGINS.pop(origin.entry_point, None)
    warnings.warn(f"ctxbench plugin {origin.distribution} ({origin.entry_point}) was not loaded: {why}; uninstall it "
                  "or fix it (ctxbench runs without it)", stacklevel=2)


def _import_tree(name: str) -> None:
    if name in _LOADED:
        return
    _LOADED.add(name)
    mod = importlib.import_module(name)
    if hasattr(mod, "__path__"):  # a package: import every module below it
        for info in pkgutil.walk_packages(mod.__path__, prefix=name + "."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                importlib.import_module(info.name)


def _load_plugins() -> None:
    if "plugins" in _LOADED:
        return
    _LOADED.add("plugins")
    for ep in metadata.entry_points(group=PLUGIN_GROUP):
        dist = ep.dist
        origin = PluginOrigin(ep.name, dist.metadata["Name"] if dist else ep.name, dist.version if dist else "")
        _LOADING.append(origin)
        try:
            ep.load()
        except PluginClash as e:
            _unload(origin, str(e))
            continue
        except (Exception, SystemExit, KeyboardInterrupt) as e:  # noqa: BLE001 - a broken plugin is reported, not fatal
            code = f" {e.code}" if isinstance(e, SystemExit) and e.code is not None else ""
            _unload(origin, f"importing {ep.value} failed: {e.__class__.__name__}{code}" + (f": {e}" if str(e) and not code else ""))
            _forget_modules(ep.value)
            continue
        finally:
            _LOADING.pop()
        _PLUGINS[ep.name] = ep.value


def _forget_modules(value: str) -> None:
    """Drop a failed plugin's half-imported module, so nothing else finds what it defined before it failed."""
    import sys

    module = value.split(":", 1)[0].strip()
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        del sys.modules[name]


def _load(kind: str) -> None:
    for name in _PROVIDERS[kind]:
        _import_tree(name)
    _load_plugins()


def plugins() -> dict[str, str]:
    """The plugins that loaded: entry-point name -> module."""
    _load_plugins()
    return dict(_PLUGINS)


def info(kind: str, name: str) -> dict[str, Any]:
    """What an entry declared when it registered (empty when nothing, or when no entry has the name)."""
    _load(kind)
    return dict(_INFO.get((kind, name), {}))


def origin(kind: str, name: str) -> PluginOrigin | None:
    """The plugin that registered `name` (None for ctxbench's own entries)."""
    _load(kind)
    return _ORIGINS.get((kind, name))


def names(kind: str) -> list[str]:
    """The registered names of a kind, sorted (plugins' included)."""
    _load(kind)
    return sorted(_REGISTRY[kind])


def entries(kind: str) -> dict[str, Callable[..., Any]]:
    _load(kind)
    return dict(sorted(_REGISTRY[kind].items()))


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
        raise ConfigError(f"{field or kind}: unknown {_NOUN.get(kind, kind)} {name!r}{hint}") from None


# --- traits: what an entry declares when it registers, and typed views of them ---------------------------------------

def _is_model(value: Any) -> bool:
    return value is None or (isinstance(value, type) and hasattr(value, "model_fields"))


def _is_names(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(isinstance(v, str) and v for v in value)


def _is_version(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# The published thresholds a task can declare its effective length is graded against (register("task", NAME,
# effective_length="ruler")): "ruler" is RULER's (the board's --threshold, 85.6 by default: Llama-2-7B at 4K on
# RULER's 13 tasks). A task that declares none gets no effective length: a threshold set on another benchmark's
# scale says nothing about it.
EFFECTIVE_LENGTH_THRESHOLDS = ("ruler",)

# kind -> trait -> (check, what it must be). A kind not listed declares nothing.
TRAITS: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    "backend": {"args": (_is_model, "a pydantic model of its --backend-arg keys"),
                "samples": (lambda v: isinstance(v, bool), "True if it decodes with --gen-kwargs"),
                "distributions": (_is_names, "the distributions whose versions a record names, e.g. ('vllm',)"),
                "model_free": (lambda v: isinstance(v, bool), "True if its answers never come from the model (as echo)"),
                "batch_dependent": (lambda v: isinstance(v, bool),
                                    "True if which prompts share a batch can change its greedy outputs (as vllm)"),
                "thinking": (lambda v: isinstance(v, bool),
                             "False if it has no thinking budget or reasoning split (as lmeval); True by default")},
    "task": {"args": (_is_model, "the pydantic model of its arguments"),
             "version": (_is_version, "an integer >= 0 (harness/core/task_versions.py)"),
             "effective_length": (lambda v: v is None or v in EFFECTIVE_LENGTH_THRESHOLDS,
                                  "the effective-length threshold its scores are graded against: one of "
                                  "EFFECTIVE_LENGTH_THRESHOLDS, e.g. 'ruler'; leave it out where none applies")},
    "metric": {"scale": (lambda v: isinstance(v, str), "a scale name (harness/core/metrics.py)"),
               "higher_is_better": (lambda v: isinstance(v, bool), "True or False")},
    "synthesis": {"produces": (lambda v: v is None or (isinstance(v, str) and bool(v)), "a name for the data it writes"),
                  "trainer": (lambda v: v is None or (isinstance(v, str) and bool(v)), "the trainer that trains on it")},
}


def _check_traits(kind: str, name: str, info: dict[str, Any]) -> None:
    """A trait this kind does not have, or one of the wrong type, is a programming error of the registering module
    (for a plugin: it is not loaded, in one warning line)."""
    known = TRAITS.get(kind, {})
    for key, value in info.items():
        if key not in known:
            have = f"traits: {', '.join(known)}" if known else "it declares none"
            raise ValueError(f"register({kind!r}, {name!r}): unknown trait {key!r}; a {_NOUN.get(kind, kind)}'s {have}")
        check, what = known[key]
        if not check(value):
            raise ValueError(f"register({kind!r}, {name!r}): {key}={value!r}; give {what}")


def _entry_name(kind: str, name: str, field: str | None) -> str:
    """The registered name behind `name` (`lmeval:<type>` is `lmeval`'s entry); an unknown name is refused as get()
    refuses it."""
    get(kind, name, field=field)
    return name if name in _REGISTRY[kind] else name.split(":", 1)[0]


@dataclasses.dataclass(frozen=True)
class BackendTraits:
    """What a backend declared when it registered: register("backend", NAME, args=Model, samples=True,
    distributions=("vllm",), model_free=True, batch_dependent=True, thinking=False). A plugin backend declares the same and is checked,
    listed, recorded and filed the same."""

    name: str
    args: type | None = None  # its --backend-arg keys, checked before anything is written; None: checked when built
    samples: bool = False  # decodes with a run's --gen-kwargs (temperature, top_p, top_k, seed); else greedy only
    distributions: tuple[str, ...] = ()  # packages whose versions can change its results (a record names them)
    model_free: bool = False  # answers without the model (echo): its runs are filed and named apart from the model's
    batch_dependent: bool = False  # a batching engine (vllm): a session notes that greedy outputs can depend on batches
    thinking: bool = True  # takes --thinking on/auto (a thinking budget, the reasoning split); lm-eval's model does not

    @property
    def execution(self) -> frozenset[str]:
        """Its execution-only arguments (speed, never results), as its Args model's fields classify themselves."""
        from ctxbench.harness.core.identity import backend_execution_args

        return backend_execution_args(self.name)


def backend_traits(name: str, *, field: str | None = None) -> BackendTraits:
    """A registered backend's traits (`lmeval:<type>`: lmeval's); an unknown backend is refused in one line."""
    entry = _entry_name("backend", name, field)
    declared = _INFO.get(("backend", entry), {})
    return BackendTraits(entry, declared.get("args"), declared.get("samples", False),
                         tuple(declared.get("distributions", ())), declared.get("model_free", False),
                         declared.get("batch_dependent", False), declared.get("thinking", True))


@dataclasses.dataclass(frozen=True)
class TaskTraits:
    """What a task declared when it registered: register("task", NAME, args=Model, version=N, effective_length=...)."""

    name: str
    args: type | None = None  # the model of its arguments (a suite's args:, --arg KEY=VALUE)
    version: int = 0  # above 0: part of a run's identity (harness/core/task_versions.py)
    effective_length: str | None = None  # the threshold its effective length is graded against; None: no threshold


def task_traits(name: str, *, field: str | None = None) -> TaskTraits:
    """A registered task's traits; an unknown task is refused in one line."""
    entry = _entry_name("task", name, field)
    declared = _INFO.get(("task", entry), {})
    return TaskTraits(entry, declared.get("args"), declared.get("version", 0), declared.get("effective_length"))


def declared(kind: str, name: str, trait: str, default: Any = None) -> Any:
    """One trait an entry declared, or `default` where it declared none or no entry has the name (a store written
    with a plugin that is no longer installed, a backend object a test or notebook passes): never refused, so
    reading an old store or running a handed-in backend never needs the registration. `lmeval:<type>`: lmeval's."""
    head = str(name or "").split(":", 1)[0] if kind == "backend" else str(name or "")
    _load(kind)
    return _INFO.get((kind, head), {}).get(trait, default)


def model_free(backend: str) -> bool:
    """Whether a backend declared model_free=True (its answers never come from the model, as echo's): its runs are
    filed (`echo:<fingerprint>`) and named (`echo(<model>)`) apart from the model's. A name no installed backend has
    is not model-free."""
    return bool(declared("backend", backend, "model_free", False))
