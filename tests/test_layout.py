"""The tree's shape (issue 34): no import cycle between our modules, no oversized module, benchmarks hold
code, not results.

The import graph counts every import that runs: at module level and inside functions (an import moved into
a function to hide a cycle is still a cycle), but not those under ``if TYPE_CHECKING:``. ``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg`` itself (its ``__init__``). The
implicit import of a parent package's ``__init__`` is not an edge: Python runs it first, whoever asks.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels_env", "models", "research", "experiments", "benchmarks")
LIBRARIES = ("kernels_env", "models", "research", "experiments", "benchmarks", "scripts")
MAX_LINES = 500
MAX_BENCHMARK_SHARE = 0.15


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST):
    """Import nodes that can run (skips ``if TYPE_CHECKING:`` bodies)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        edges: set[str] = set()
        for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            edges.update(t for t in (_owner(name, modules) for name in targets) if t and t != module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x.y\ndef f():\n    import x.z\n"
    names = [a.name for n in _runtime_imports(ast.parse(source)) for a in n.names]
    assert sorted(names) == ["TYPE_CHECKING", "x.z"]


def test_no_import_cycles_between_our_modules():
    found = cycles(import_graph(_modules()))
    listed = "\n".join(map(" <-> ".join, found))
    assert not found, f"import cycles (each an SCC of the import graph):\n{listed}"


SKIP_DIRS = {"outputs", "multirun", "runs", "__pycache__", "node_modules"}  # .gitignore's build/run outputs


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in SKIP_DIRS or name.endswith(".egg-info")


def _tree(*tops: str) -> list[Path]:
    """The tree's files below ``tops`` (all of it by default), without hidden and git-ignored output dirs,
    which are never entered (a checkout's .venv and .git hold far more files than the tree)."""
    found = []
    for top in tops or (".",):
        for folder, dirs, files in os.walk(ROOT / top):
            dirs[:] = sorted(d for d in dirs if not _skipped(d))
            found += [Path(folder) / f for f in sorted(files)]
    return found


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def test_no_module_over_500_lines_outside_tests():
    big = {
        str(p.relative_to(ROOT)): n
        for p in _tree(*LIBRARIES)
        if p.suffix == ".py" and (n := _lines(p)) > MAX_LINES
    }
    assert not big, f"modules over {MAX_LINES} lines (split them by responsibility): {big}"


def test_benchmarks_hold_benchmark_code_not_results():
    every = _tree()
    total = sum(_lines(p) for p in every)
    bench = sum(_lines(p) for p in every if p.relative_to(ROOT).parts[0] == "benchmarks")
    assert bench / total < MAX_BENCHMARK_SHARE, f"benchmarks/ is {bench}/{total} lines ({bench / total:.0%})"
    data = [str(p.relative_to(ROOT)) for p in every if p.relative_to(ROOT).parts[0] == "benchmarks"
            and p.suffix in {".json", ".jsonl", ".png", ".txt", ".log"}]
    assert not data, f"results belong in docs/results/, not benchmarks/: {data[:10]}"
