"""Issue 32, plugins: a plugin that fails at import (an exception half-way, sys.exit, KeyboardInterrupt) or clashes
with another plugin is unloaded whole and reported as a plugin failure in one warning; ctxbench goes on without it."""

from __future__ import annotations

import itertools
import textwrap
import warnings

import pytest

from ctxbench.harness.core import registry

_UNIQUE = itertools.count()


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A registry with ctxbench's own entries and no plugin loaded yet; `install(body)` adds a plugin distribution."""
    for kind in registry.KINDS:
        registry.names(kind)  # ctxbench's own entries are in before the copy (their modules import once)
    monkeypatch.setattr(registry, "_REGISTRY", {k: dict(v) for k, v in registry._REGISTRY.items()})
    monkeypatch.setattr(registry, "_INFO", dict(registry._INFO))
    monkeypatch.setattr(registry, "_ORIGINS", dict(registry._ORIGINS))
    monkeypatch.setattr(registry, "_PLUGINS", {})
    monkeypatch.setattr(registry, "_LOADED", set(registry._LOADED) - {"plugins"})
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def install(dist: str, body: str) -> str:
        module = f"plugin_{next(_UNIQUE)}_{dist.replace('-', '_')}"
        info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[ctxbench.plugins]\n{dist} = {module}\n")
        (site / f"{module}.py").write_text("from ctxbench.harness.core.registry import register\n" + textwrap.dedent(body))
        return module

    return install


def _load() -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.names("task")
    return [str(w.message) for w in caught if "ctxbench plugin" in str(w.message)]


def test_a_plugin_failing_half_way_keeps_none_of_its_entries(fresh):
    fresh("ctxbench-half", '''
        @register("task", "half/first")
        def first(**args): ...
        @register("metric", "half/metric")
        def metric(**args): ...
        raise RuntimeError("the second half is broken")
    ''')
    (line,) = _load()
    assert "ctxbench-half" in line and "RuntimeError" in line and "the second half is broken" in line
    assert "half/first" not in registry.names("task") and "half/metric" not in registry.names("metric")
    assert registry.origin("task", "half/first") is None and "ctxbench-half" not in registry.plugins()


@pytest.mark.parametrize("stop, said", [("import sys; sys.exit(3)", "SystemExit 3"),
                                        ("raise KeyboardInterrupt", "KeyboardInterrupt")])
def test_sys_exit_or_ctrl_c_at_import_is_a_plugin_failure(fresh, stop, said):
    fresh("ctxbench-quits", f'''
        @register("task", "quits/first")
        def first(**args): ...
        {stop}
    ''')
    (line,) = _load()  # no SystemExit or KeyboardInterrupt escapes: the command goes on
    assert "ctxbench-quits" in line and said in line and "was not loaded" in line
    assert "quits/first" not in registry.names("task")


def test_two_plugins_with_one_name_are_named_both_and_the_second_is_unloaded(fresh):
    fresh("ctxbench-first", '''
        @register("task", "shared/name")
        def first(**args): ...
    ''')
    fresh("ctxbench-second", '''
        @register("task", "second/own")
        def own(**args): ...
        @register("task", "shared/name")
        def second(**args): ...
    ''')
    (line,) = _load()
    assert "ctxbench-second" in line and "ctxbench-first" in line and "shared/name" in line
    assert registry.origin("task", "shared/name").distribution == "ctxbench-first"
    assert "second/own" not in registry.names("task")


def test_ctxbench_registering_a_name_a_plugin_took_first_unloads_the_plugin(fresh):
    """Order-independent: a plugin imported before ctxbench's module of that kind loses the name, whole."""
    fresh("ctxbench-early", '''
        @register("task", "early/own")
        def own(**args): ...
        @register("task", "late/builtin")
        def taken(**args): ...
    ''')
    assert not _load() and "early/own" in registry.names("task")

    def builtin(**args): ...

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.register("task", "late/builtin")(builtin)  # as a ctxbench module would, after the plugin
    (line,) = [str(w.message) for w in caught]
    assert "ctxbench-early" in line and "ctxbench already registers" in line
    assert registry.get("task", "late/builtin") is builtin and "early/own" not in registry.names("task")


def test_ctxbench_registering_a_name_twice_is_still_a_bug(fresh):
    def a(**args): ...

    def b(**args): ...

    registry.register("task", "twice/own")(a)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("task", "twice/own")(b)

