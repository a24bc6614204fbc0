"""No import cycle inside ``research`` or ``models`` (imports inside functions count: a lazy import must not
hide one). A cycle is reported as its modules; the fix is a leaf module holding the shared names."""

from __future__ import annotations

import ast

import pytest

from tests.test_boundaries import ROOT, _modules


def imported(source: str, module: str, is_package: bool, mods) -> set[str]:
    """The project modules a source imports anywhere: ``from pkg import name`` is pkg.name where that is a
    module (pkg is then already importing), else pkg."""
    found = set()
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in mods else stem for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    mods = {name: (path, is_pkg) for path, name, is_pkg in _modules(package)}
    return {name: imported(path.read_text(), name, is_pkg, mods) for name, (path, is_pkg) in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_lazy_cycle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    src = "def f():\n    from .b import x\n"
    assert imported(src, "p.a", False, {"p", "p.a", "p.b"}) == {"p.b"}


@pytest.mark.parametrize("package", ["research", "models"])
def test_no_import_cycle(package):
    assert (ROOT / package).is_dir()
    assert cycles(import_graph(package)) == []
