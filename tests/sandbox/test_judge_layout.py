"""The judge's layout (kernels_env/judge/__init__.py): stage packages that import each other in one order,
and no import of a project module hidden inside a function of the judge or the client (their lazy imports
were how cycles hid). Import cycles and module sizes of the whole project: tests/test_layout.py. Static,
in-process."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layout import _modules as _project_modules
from tests.test_layout import import_graph

ROOT = Path(__file__).resolve().parents[2]
PARTS = (ROOT / "kernels_env" / "judge", ROOT / "kernels_env" / "client")
# Which of the judge's stage packages each may import (kernels_env/judge/__init__.py says why).
STAGES = {
    "build": set(),
    "check": {"build"},
    "timing": {"build"},
    "assemble": {"build"},
    "run": {"build", "check", "timing", "assemble"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for part in PARTS:
        for path in sorted(part.rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = path
    return found


def _imports(module: str, path: Path, inside_functions: bool = False) -> set[str]:
    """The kernels_env names ``module`` imports (relative imports resolved; ``from pkg import mod`` is
    ``pkg.mod``, ``from mod import name`` is ``mod.name``, resolved to ``mod`` by ``_graph``, as
    an import graph does); with ``inside_functions`` only those imported in a function body."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom | ast.Import) and in_function == inside_functions:
                if isinstance(child, ast.Import):
                    names = [a.name for a in child.names]
                else:
                    base = child.module or ""
                    if child.level:
                        base = ".".join(package[: len(package) - child.level + 1] + ([base] if base else []))
                    names = [f"{base}.{a.name}" for a in child.names]  # a name that is no module: ``base``
                out.update(n for n in names if n.startswith("kernels_env.") and n != module)
            visit(child, nested)

    visit(ast.parse(path.read_text()), False)
    return out


def _graph() -> dict[str, set[str]]:
    """The project's import graph (tests/test_layout.py) restricted to the judge's and client's modules."""
    mine = _modules()
    return {name: deps for name, deps in import_graph(_project_modules()).items() if name in mine}


def test_no_project_import_is_hidden_in_a_function():
    hidden = {name: sorted(_imports(name, path, inside_functions=True)) for name, path in _modules().items()}
    assert {name: found for name, found in hidden.items() if found} == {}


def test_stage_packages_import_only_the_stages_before_them():
    packages = {p.name for p in (ROOT / "kernels_env" / "judge").iterdir() if p.is_dir() and p.name[0] != "_"}
    assert set(STAGES) == packages
    wrong = {}
    for name, deps in _graph().items():
        parts = name.split(".")
        if parts[1] != "judge" or len(parts) < 3:
            continue
        used = {d.split(".")[2] for d in deps if d.startswith("kernels_env.judge.") and d.count(".") >= 2}
        extra = used - STAGES[parts[2]] - {parts[2]}
        if extra:
            wrong[name] = sorted(extra)
    assert wrong == {}
