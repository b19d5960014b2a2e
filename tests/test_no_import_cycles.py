"""No module of ctxbench imports another in a cycle (issue 33: "no import cycle between modules anywhere").

The rule, read statically with `ast` over every module of harness/, tasks/, trainers/ and leaderboard/:
- every import counts, module-level and lazy (inside a function) alike: a lazy import hides a cycle from Python's
  import machinery, not from the design (runner -> adaptive_run -> runner was one);
- `if TYPE_CHECKING:` imports do not count (they never run);
- a lazy import that closes a cycle is allowed only where it is listed in LAZY_CYCLE_EDGES below with the reason
  it must stay; the list is checked to name only lazy imports that exist, so it cannot rot.
Importing `a.b.c` does not count as importing the package `a.b` here (package __init__ cycles are
tests/test_import_cycles.py's subprocess checks).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import TOPS, module_name, source_files

# (importer, imported): lazy imports allowed to close a cycle, each with why it must stay.
LAZY_CYCLE_EDGES: dict[tuple[str, str], str] = {
    ("ctxbench.harness.core.registry", "ctxbench.harness.core.identity"):
        "BackendTraits.execution reads the one identity rule; identity reads the registry's declared Args models",
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST, lazy: bool = False):
    """(node, lazy) for every import that can run: TYPE_CHECKING blocks skipped, function bodies marked lazy."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for orelse in child.orelse:
                yield from _import_nodes(orelse, lazy)
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, lazy
        yield from _import_nodes(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def _targets(node: ast.Import | ast.ImportFrom, me: str, is_package: bool) -> list[str]:
    """The module names an import statement names: `from pkg import mod` names pkg and pkg.mod."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = me if is_package else me.rsplit(".", 1)[0]
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    return [mod, *(f"{mod}.{a.name}" for a in node.names)]


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, bool]]:
    """module -> {imported module of the package: whether every such import of it is lazy}."""
    graph: dict[str, dict[str, bool]] = {m: {} for m in modules}
    for me, path in modules.items():
        for node, lazy in _import_nodes(ast.parse(path.read_text(), filename=str(path))):
            for target in _targets(node, me, path.name == "__init__.py"):
                if target in modules and target != me:
                    graph[me][target] = graph[me].get(target, True) and lazy
    return graph


def package_graph() -> dict[str, dict[str, bool]]:
    return import_graph({module_name(p): p for p in source_files(*TOPS)})


def cycles(graph: dict[str, dict[str, bool]], allowed: set[tuple[str, str]] = frozenset()) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), the allowed lazy edges left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if (v, w) in allowed and graph[v][w]:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_module_imports_another_in_a_cycle():
    graph = package_graph()
    found = cycles(graph, set(LAZY_CYCLE_EDGES))
    assert not found, "import cycles (break them, or list a needed lazy edge in LAZY_CYCLE_EDGES with why):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def test_each_allowed_lazy_edge_exists_and_is_lazy():
    graph = package_graph()
    stale = [f"{a} -> {b}" for a, b in LAZY_CYCLE_EDGES if graph.get(a, {}).get(b) is not True]
    assert not stale, f"LAZY_CYCLE_EDGES names imports that are gone or module-level: {stale}"


def test_the_cycle_check_sees_a_lazy_cycle(tmp_path):
    """Two probe modules that import each other, one of them lazily inside a function, are a cycle; an import under
    TYPE_CHECKING is no edge. (Written to tmp_path: the walk over the package never sees them.)"""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from ctxbench.probe import b\n")
    b.write_text("import typing\nif typing.TYPE_CHECKING:\n    from ctxbench.probe import c\n\n"
                 "def f():\n    from ctxbench.probe.a import x\n    return x\n")
    c = tmp_path / "c.py"
    c.write_text("from ctxbench.probe import b\n")
    graph = import_graph({"ctxbench.probe.a": a, "ctxbench.probe.b": b, "ctxbench.probe.c": c})
    assert graph["ctxbench.probe.b"] == {"ctxbench.probe.a": True}
    assert cycles(graph) == [["ctxbench.probe.a", "ctxbench.probe.b"]]
    assert cycles(graph, {("ctxbench.probe.b", "ctxbench.probe.a")}) == []
