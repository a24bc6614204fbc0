"""KernelBench's other backends (issue 31): CuTe DSL (``nvidia-cutlass-dsl``, imported as ``cutlass`` /
``cutlass.cute``), TileLang (``tilelang``) and ThunderKittens (the ``kittens.cuh`` C++ headers of a checkout
named by ``THUNDERKITTENS_ROOT``, or a prebuilt ``tk_kernels`` / ``thunderkittens`` module). A solution
written for one of them cannot be judged on a machine without its toolchain: that is the machine's gap, not
the candidate's failure, so the compile worker answers ``toolchain_missing`` (naming the package, no reward)
before any candidate code runs, and judges the solution as usual where the toolchain is installed.

What a solution needs is read from its sources without running them: the imports it makes unconditionally
(parsed; an import inside ``try`` with an ``ImportError`` handler is optional and needs nothing) and the
ThunderKittens header it includes (in any file or string). Whether the toolchain is here is looked up
without importing it (``importlib.util.find_spec`` of a top-level name and the package's directories): the
compile worker forks a child per request and must stay free of what those packages initialise. A Python
source that does not parse needs nothing here: its syntax error is the candidate's ``compile_error``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Toolchain:
    backend: str  # the name in a verdict's ``backends``
    package: str  # what to install
    modules: tuple[str, ...]  # top-level modules a solution imports
    submodule: str = ""  # a subpackage a solution may need too (CuTe DSL: ``cutlass.cute``)


TOOLCHAINS = (
    Toolchain("cute_dsl", "nvidia-cutlass-dsl", ("cutlass",), "cute"),
    Toolchain("tilelang", "tilelang", ("tilelang",)),
    Toolchain("thunderkittens", "ThunderKittens", ("thunderkittens", "tk_kernels")),
)
KITTENS_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:[\w.-]+/)*kittens\.cuh[>\"]")
KITTENS_ROOTS = ("THUNDERKITTENS_ROOT", "TK_ROOT")  # KernelBench's example reads THUNDERKITTENS_ROOT
KITTENS_DEFAULT = "/root/ThunderKittens"  # ... and falls back to this checkout
_OPTIONAL = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


class _Imports(ast.NodeVisitor):
    """Modules a source imports anywhere (functions included: they run when called); ``unconditional``: not
    those inside a ``try`` that handles ``ImportError`` (optional)."""

    def __init__(self, unconditional: bool) -> None:
        self.modules: set[str] = set()
        self._optional = 0
        self._unconditional = unconditional

    def visit_Try(self, node: ast.Try) -> None:
        guarded = any(_catches_import_error(h) for h in node.handlers)
        self._optional += guarded
        for child in node.body:
            self.visit(child)
        self._optional -= guarded
        for child in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(child)

    visit_TryStar = visit_Try

    def _counts(self) -> bool:
        return not (self._unconditional and self._optional)

    def visit_Import(self, node: ast.Import) -> None:
        if self._counts():
            self.modules.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if self._counts() and not node.level and node.module:
            self.modules.add(node.module)
            self.modules.update(f"{node.module}.{alias.name}" for alias in node.names)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _OPTIONAL for n in names)


def imported_modules(text: str, unconditional: bool = False) -> set[str] | None:
    """The modules ``text`` imports (``pkg``, ``pkg.sub``; ``from pkg import name`` also as ``pkg.name``),
    only the unconditional ones if asked; None when it does not parse as Python."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    visitor = _Imports(unconditional)
    visitor.visit(tree)
    return visitor.modules


def required_modules(text: str) -> set[str] | None:
    """The modules ``text`` imports unconditionally; None when it does not parse as Python."""
    return imported_modules(text, unconditional=True)


def findable(dotted: str) -> bool:
    """Whether ``dotted`` (``pkg`` or ``pkg.sub``) is installed, without importing anything."""
    top, _, rest = dotted.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if not rest:
        return True
    sub = rest.replace(".", "/")
    return any(
        (Path(loc) / sub).is_dir() or (Path(loc) / f"{sub}.py").is_file()
        for loc in spec.submodule_search_locations or ()
    )


def kittens_headers() -> str | None:
    """The directory holding ``kittens.cuh`` (a ThunderKittens checkout's ``include``), or None."""
    roots = [os.environ.get(name) for name in KITTENS_ROOTS] + [KITTENS_DEFAULT]
    for root in filter(None, roots):
        for folder in (Path(root) / "include", Path(root)):
            if (folder / "kittens.cuh").is_file():
                return str(folder)
    return None


def missing(python_texts: list[str], other_texts: list[str] = ()) -> list[dict[str, str]]:
    """The toolchains the solution needs that this machine lacks: ``{"backend", "package", "what"}`` each
    (``what``: the module or header it needs). Empty when everything is here, when the solution uses none,
    and when a Python source does not parse (the candidate's ``compile_error``)."""
    modules: set[str] = set()
    for text in python_texts:
        found = required_modules(text)
        if found is None:
            return []
        modules |= found
    out: list[dict[str, str]] = []
    for tc in TOOLCHAINS:
        used = sorted(m for m in modules if m.split(".")[0] in tc.modules)
        needs = sorted({m.split(".")[0] for m in used})
        if tc.submodule:  # ``import cutlass.cute``, ``from cutlass import cute``: the subpackage too
            sub = [f"{t}.{tc.submodule}" for t in needs]
            needs = [s for s in sub if any(m == s or m.startswith(f"{s}.") for m in used)] or needs
        lacking = [m for m in needs if not findable(m)]
        if lacking:
            out.append({"backend": tc.backend, "package": tc.package, "what": ", ".join(lacking)})
    if any(KITTENS_INCLUDE.search(t) for t in [*python_texts, *other_texts]) and kittens_headers() is None:
        what = f"kittens.cuh: a ThunderKittens checkout in ${KITTENS_ROOTS[0]}"
        kittens = [m for m in out if m["backend"] == "thunderkittens"]
        if kittens:
            kittens[0]["what"] += f"; {what}"
        else:
            out.append({"backend": "thunderkittens", "package": "ThunderKittens", "what": what})
    return out


def error_line(lacking: list[dict[str, str]]) -> str:
    """``needs nvidia-cutlass-dsl (cutlass.cute), not installed here``: one line naming each package."""
    return "needs " + " and ".join(f"{m['package']} ({m['what']})" for m in lacking) + ", not installed here"
