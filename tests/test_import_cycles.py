"""No import cycles in kernels_env (issue 34), counting imports inside functions too: a cycle hidden behind
a function-level import is still a cycle. ``judge/`` is left out while it is being split (its own cycles
are that work's to remove). No cycle through it can hide: the layers (test_boundaries) let it import only the
parts below it, and those parts nothing above them."""

from __future__ import annotations

import ast

from tests.test_boundaries import _modules

LEFT_OUT = ("kernels_env.judge",)


def imports(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The ``known`` modules a source imports anywhere, functions included: ``from . import x`` imports the
    module ``x`` when there is one (and then not its package), relative imports resolved."""
    found: set[str] = set()
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports."""
    sources = {name: (path, is_pkg) for path, name, is_pkg in _modules(package)}
    return {
        name: imports(path.read_text(), name, is_pkg, set(sources))
        for name, (path, is_pkg) in sources.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
    return found


def _outside_judge(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    keep = lambda m: not any(m == p or m.startswith(p + ".") for p in LEFT_OUT)  # noqa: E731
    return {m: {d for d in deps if keep(d)} for m, deps in graph.items() if keep(m)}


def test_cycles_finds_a_cycle_hidden_in_a_function():
    sources = {
        "p": "from . import a\n",  # a package importing its module: no cycle by itself
        "p.a": "from . import b\n",
        "p.b": "def f():\n    from .a import x  # hidden, still an edge\n",
        "p.c": "from . import a\nfrom .a import y\n",
    }
    graph = {m: imports(text, m, m == "p", set(sources)) for m, text in sources.items()}
    assert graph["p.c"] == {"p.a"}
    assert cycles(graph) == [["p.a", "p.b"]]


def test_kernels_env_has_no_import_cycle():
    graph = _outside_judge(import_graph("kernels_env"))
    assert "kernels_env.runtime.supervisor" in graph and graph["kernels_env.client"]  # the graph is real
    assert cycles(graph) == []
