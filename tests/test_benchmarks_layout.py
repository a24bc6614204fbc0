"""The layout of the benchmarks and the repository's import hygiene: every benchmark is a module of an area
package (``python -m benchmarks.<area>.<name>``), generated solution sets are not in the tree, no Python file
edits ``sys.path``, and no library package (kernels_env, models, research) points at ``benchmarks/`` in its
code (data a library needs at run time is a package asset)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
AREAS = ("sandbox", "models", "rl", "data", "toyenv")
SHARED = {"benchmarks/__init__.py", "benchmarks/_results.py"}  # the package and its one results writer
DATA_DIRS = ("benchmarks/results/", "benchmarks/sandbox/solutions/", "benchmarks/sandbox/tasks/")  # sets
SKIP_DIRS = {".venv", ".git", "__pycache__", "outputs", "multirun", "runs", "node_modules"}
# Edits that are behaviour, not import shortcuts: the judge makes a candidate's own workspace importable
# while its solution loads (a multi-file candidate imports its sibling modules), inside the sandbox worker,
# and takes it off again; the toolchain test fakes an installed package (monkeypatch undoes it).
SYS_PATH_ALLOWED = {"kernels_env/judge/build/loader.py", "tests/sandbox/test_toolchains.py"}
LIBRARIES = ("kernels_env", "models", "research")


def _python_files(top: Path):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for name in filenames:
            if name.endswith(".py"):
                yield Path(dirpath) / name


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _benchmark_modules() -> list[str]:
    return sorted(r for r in map(_rel, _python_files(BENCH)) if not r.startswith(DATA_DIRS))


def _runs_as_main(tree: ast.Module) -> bool:
    main = "__name__ == '__main__'"
    return any(isinstance(n, ast.If) and ast.unparse(n.test) == main for n in tree.body)


MUTATORS = {"insert", "append", "extend", "remove", "pop"}


def sys_path_edits(source: str) -> list[str]:
    """The statements of ``source`` that change the import path: ``sys.path`` mutated, assigned or sliced,
    pytest's ``syspath_prepend``, ``site.addsitedir``. A file Python cannot parse (a deliberately broken
    candidate among the fixtures) never runs, so it edits nothing."""
    if not any(word in source for word in ("sys.path", "syspath_prepend", "addsitedir")):
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            mutates = ast.unparse(node.func.value).endswith("sys.path") and node.func.attr in MUTATORS
            if mutates or node.func.attr in {"syspath_prepend", "addsitedir"}:
                found.append(ast.unparse(node))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if ast.unparse(base).endswith("sys.path"):
                    found.append(ast.unparse(node))
    return found


def benchmark_paths_in_code(source: str) -> list[str]:
    """String constants in code (docstrings left out: prose may name a benchmark) that name the benchmarks'
    directory: a path such as ``.../benchmarks/results/x.json`` or a ``/ "benchmarks"`` join."""
    if "benchmarks" not in source:
        return []
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and (node.value.strip("/") == "benchmarks" or "benchmarks/" in node.value)
    ]


def test_every_benchmark_is_a_module_of_an_area_package():
    for area in (*AREAS, "_common"):
        init = BENCH / area / "__init__.py"
        assert init.is_file(), f"{init} missing: every area is a package"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{_rel(init)}: its one-paragraph docstring"
    outside, scripts_outside = [], []
    for rel in _benchmark_modules():
        parts = rel.split("/")
        in_area = len(parts) >= 3 and parts[1] in AREAS
        if not (in_area or rel in SHARED or parts[1] == "_common"):
            outside.append(rel)
        if _runs_as_main(ast.parse((ROOT / rel).read_text())) and not in_area:
            scripts_outside.append(rel)
    assert not outside, f"benchmark code outside benchmarks/{{{','.join(AREAS)}}}/: {outside}"
    assert not scripts_outside, f"entry points outside an area package: {scripts_outside}"


def test_benchmarks_import_each_other_by_package_name():
    """``from rl_step import X`` only worked with the script's directory on sys.path; ``python -m`` needs the
    package name (``from benchmarks.rl.rl_step import X``) or a relative import."""
    local = {Path(r).stem for r in _benchmark_modules()} | {p.name for p in BENCH.rglob("_*") if p.is_dir()}
    local -= {"__init__"}
    bad = []
    for rel in _benchmark_modules():
        for node in ast.walk(ast.parse((ROOT / rel).read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bad += [f"{rel}: {n}" for n in names if n.split(".")[0] in local]
    assert not bad, bad


def test_generated_solution_sets_are_not_in_the_tree():
    assert not list(BENCH.rglob("load_inline_set/")), "the load_inline set is generated into the cache"
    solution_sets = {p.name for p in (BENCH / "sandbox" / "solutions").iterdir() if p.is_dir()}
    assert solution_sets == {"fastpath"}, f"only hand-written solutions stay in git: {solution_sets}"


def test_no_python_file_edits_sys_path():
    edits = {}
    for path in _python_files(ROOT):
        rel = _rel(path)
        if rel not in SYS_PATH_ALLOWED and (found := sys_path_edits(path.read_text(errors="replace"))):
            edits[rel] = found
    assert not edits, f"import by package name instead (python -m, pytest's pythonpath = .): {edits}"


def test_library_code_does_not_point_at_benchmarks():
    found = {}
    for lib in LIBRARIES:
        for path in _python_files(ROOT / lib):
            if hits := benchmark_paths_in_code(path.read_text()):
                found[_rel(path)] = hits
    assert not found, f"library code must not read benchmark files; ship data as a package asset: {found}"


@pytest.mark.parametrize(
    "source",
    [
        "import sys\nsys.path.insert(0, 'x')",
        "import sys\nsys.path.append(str(ROOT))",
        "import sys\nsys.path[:0] = [a, b]",
        "import sys\nsys.path = ['x'] + sys.path",
        "import sys\nsys.path += ['x']",
        "def test(monkeypatch):\n    monkeypatch.syspath_prepend('x')",
    ],
)
def test_the_sys_path_check_sees_every_form(source):
    assert sys_path_edits(source)


def test_the_sys_path_check_leaves_reads_alone():
    assert not sys_path_edits("import sys\nfor p in sys.path:\n    print(p)\nx = list(sys.path)\n")


def test_the_benchmark_path_check_sees_joins_and_paths_but_not_prose():
    standin = 'T = Path(__file__).parents[2] / "benchmarks" / "results" / "t.json"\n'  # what standin.py did
    assert benchmark_paths_in_code(standin) == ["benchmarks"]
    assert benchmark_paths_in_code('X = "benchmarks/results/t.json"\n') == ["benchmarks/results/t.json"]
    prose = '"""Measured by benchmarks/toyenv/toy_plan_speeds.py."""\ndef f():\n    """See benchmarks/."""\n'
    assert benchmark_paths_in_code(prose) == []
