"""Load KernelBench-format problems and candidate solutions (a source with ``class ModelNew`` or a workspace).

Problems are read unchanged: ``class Model``, ``get_inputs()``, ``get_init_inputs()`` and any module-level
constants. Errors are ``LoadError`` with a verdict status and structured messages (syntax errors with line
and column, missing classes, constructors that cannot take ``get_init_inputs()``).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ...rules.messages import Source
from ...rules.result import COMPILE_ERROR, RUNTIME_ERROR, message
from . import agent_extension, hooks
from .diagnostics import compile_error_messages, exception_line, trim_traceback
from .errors import LoadError, ProblemError
from .sources import MAX_WORKSPACE_BYTES


@dataclass
class Loaded:
    module: ModuleType
    path: Path
    display: str  # the name the candidate knows its file by
    files: set[str] = field(default_factory=set)  # paths of its sources (for traceback trimming)
    aliases: dict[str, str] = field(default_factory=dict)  # harness path prefix -> display name


def materialize(source: Source, directory: Path) -> Path:
    """Write a source or workspace under ``directory``; return the path of the module to import."""
    directory.mkdir(parents=True, exist_ok=True)
    if source.text is not None:
        path = directory / _module_filename(source.name)
        path.write_text(source.text)
        return path
    total = 0
    for rel, text in (source.files or {}).items():
        rel_path = Path(rel)
        if rel_path.is_absolute() or ".." in rel_path.parts:
            raise LoadError(COMPILE_ERROR, f"workspace path {rel!r} escapes the workspace")
        total += len(text)
        if total > MAX_WORKSPACE_BYTES:
            raise LoadError(COMPILE_ERROR, f"workspace is larger than {MAX_WORKSPACE_BYTES} bytes")
        target = directory / rel_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    entry = directory / source.entry
    if not entry.is_file():
        raise LoadError(COMPILE_ERROR, f"workspace {source.name!r} has no {source.entry}")
    return entry


def _module_filename(name: str) -> str:
    stem = Path(name).name
    stem = stem[:-3] if stem.endswith(".py") else stem
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in stem) or "module"
    return safe + ".py"


def import_path(
    path: Path, display: str, *, status: str = COMPILE_ERROR, workspace: str | None = None
) -> Loaded:
    """Import the module at ``path`` under a unique name; failures become ``LoadError(status)``.

    ``workspace``: the display name of the workspace whose root is ``path.parent`` (its other modules are
    importable and count as the candidate's own frames).
    """
    root = path.parent
    aliases = {str(root) + os.sep: f"{workspace}/" if workspace else "", str(path): display}
    text = path.read_text()
    try:
        code = compile(text, str(path), "exec")
    except ValueError as exc:  # Python 3.11: "source code string cannot contain null bytes"
        raise LoadError(COMPILE_ERROR, f"{display}: {exc}") from None
    except SyntaxError as exc:
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        diag = {
            "file": display,
            "line": exc.lineno,
            "column": exc.offset,
            "severity": "error",
            "message": f"{type(exc).__name__}: {exc.msg}",
        }
        raise LoadError(
            COMPILE_ERROR,
            f"{display}: {type(exc).__name__} at {where}: {exc.msg}",
            [message("compiler", f"{display}:{exc.lineno}: {exc.msg}", **diag)],
        ) from None
    name = f"kernels_env_user_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    added = str(root) not in sys.path
    if added:
        sys.path.insert(0, str(root))
    loaded = Loaded(module, path, display, {str(path)}, aliases)
    if workspace:
        loaded.files |= {str(p) for p in root.rglob("*.py")}
    try:
        exec(code, module.__dict__)
    except BaseException as exc:  # also sys.exit() at import
        sys.modules.pop(name, None)
        raise classify_exception(exc, loaded, status, during="importing") from None
    finally:
        if added and str(root) in sys.path:
            sys.path.remove(str(root))
    return loaded


def classify_exception(exc: BaseException, loaded: Loaded, status: str, during: str) -> LoadError:
    """Compile errors raised by kernel builders (fastpath, load_inline, Triton) become ``compile_error``."""
    compiled = compile_error_messages(exc, loaded.aliases)
    if compiled is not None:
        error, messages = compiled
        return LoadError(COMPILE_ERROR, f"{loaded.display}: {error}", messages)
    tb = trim_traceback(exc, loaded.files, loaded.aliases)
    return LoadError(
        status,
        f"{loaded.display}: {exception_line(exc, loaded.aliases)} ({during})",
        [message("traceback", tb, exception=type(exc).__name__)],
    )


@dataclass
class Problem:
    loaded: Loaded
    Model: type
    get_inputs: Any
    get_init_inputs: Any
    source: str = ""  # inputs are generated from a fresh module of this source (judge.check.inputs)
    path: str = ""


def load_problem(path: Path, display: str) -> Problem:
    try:
        loaded = import_path(path, display, status=RUNTIME_ERROR)
    except LoadError as exc:
        raise ProblemError(f"reference {exc.error}") from None
    mod = loaded.module
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    if missing:
        raise ProblemError(f"reference {display} lacks {', '.join(missing)} (KernelBench format)")
    if not inspect.isclass(mod.Model):
        raise ProblemError(f"reference {display}: Model is not a class")
    return Problem(
        loaded, mod.Model, mod.get_inputs, mod.get_init_inputs, path.read_text(), os.path.abspath(path)
    )


def load_solution(path: Path, display: str, workspace: str | None = None) -> tuple[Loaded, type]:
    hooks.content_keyed_extensions()  # identical load_inline builds share one cached .so (any name)
    layout = agent_extension.detect(path.parent)
    if layout is not None:  # CUDA Agent's layout: build the module model_new.py imports (never its utils/)
        agent_extension.install(layout, f"{workspace}/" if workspace else "")
    loaded = import_path(path, display, workspace=workspace)
    cls = getattr(loaded.module, "ModelNew", None)
    if cls is None:
        mod = loaded.module
        defined = sorted(
            n for n, v in vars(mod).items() if inspect.isclass(v) and v.__module__ == mod.__name__
        )
        hint = f" (it defines {', '.join(defined)})" if defined else ""
        raise LoadError(COMPILE_ERROR, f"{display}: the solution defines no class ModelNew{hint}")
    if not inspect.isclass(cls):
        raise LoadError(COMPILE_ERROR, f"{display}: ModelNew is a {type(cls).__name__}, not a class")
    if not callable(getattr(cls, "forward", None)):
        raise LoadError(COMPILE_ERROR, f"{display}: ModelNew has no forward method")
    return loaded, cls


def check_call(target: Any, args: list[Any], what: str, status: str) -> None:
    """``LoadError(status)`` when ``target`` cannot be called with ``args`` (clear signature message)."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return  # builtins without a signature: let the call itself report
    try:
        sig.bind(*args)
    except TypeError as exc:
        raise LoadError(
            status,
            f"{what}{sig} cannot take the task's {len(args)} argument(s): {exc}",
        ) from None


def unload(prefix: str = "kernels_env_user_", under: Path | None = None) -> None:
    """Forget candidate modules (and modules imported from a workspace) so no state leaks to the next one."""
    agent_extension.forget()
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None) or ""
        if name.startswith(prefix) or (under is not None and path.startswith(str(under))):
            sys.modules.pop(name, None)
