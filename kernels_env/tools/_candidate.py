"""The reference and the candidate as the tools see them, loaded by the sandbox's own loader
(``judge.build.loader``) and fed by its input generator (``kernels_env.judge.check.inputs``), so a tool
imports, builds
and runs a candidate exactly as the final evaluation will. Only ever called inside a sandbox process.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..judge.build import loader
from ..judge.build.errors import LoadError, ProblemError
from ._context import ToolError

SOLUTION_FILE = "model_new.py"


@dataclass(frozen=True)
class Candidate:
    path: Path  # the module that defines ModelNew
    root: Path  # the workspace, or the solution file's directory
    workspace: bool

    @property
    def display(self) -> str:
        """How diagnostics name the module: relative to the workspace (``model_new.py``) or the file name."""
        return self.path.relative_to(self.root).as_posix() if self.workspace else self.path.name

    def python_files(self) -> dict[str, str]:
        """Display name -> text of the candidate's Python sources (the workspace's, or the one file)."""
        if not self.workspace:
            return {self.display: self.path.read_text(errors="replace")}
        return {
            p.relative_to(self.root).as_posix(): p.read_text(errors="replace")
            for p in sorted(self.root.rglob("*.py"))
            if not any(
                part.startswith(".") or part == "__pycache__" for part in p.relative_to(self.root).parts
            )
        }


def resolve_candidate(solution: str | os.PathLike) -> Candidate:
    """A solution file (``class ModelNew``) or a workspace directory holding ``model_new.py``."""
    p = Path(solution).expanduser().resolve()
    if p.is_dir():
        entry = p / SOLUTION_FILE
        if not entry.is_file():
            raise ToolError(f"workspace {p.name} has no {SOLUTION_FILE}")
        return Candidate(entry, p, True)
    if not p.is_file():
        raise ToolError(f"solution not found: {solution}")
    return Candidate(p, p.parent, False)


class CandidateError(ToolError):
    """The candidate cannot be imported or has no usable ModelNew; ``diagnostic`` says where and why."""

    def __init__(self, diagnostic: dict):
        super().__init__(diagnostic["message"])
        self.diagnostic = diagnostic


def load_reference(path: str | os.PathLike) -> loader.Problem:
    try:
        return loader.load_problem(Path(path), Path(path).name)
    except ProblemError as exc:
        raise ToolError(str(exc)) from None


def load_candidate(c: Candidate) -> tuple[loader.Loaded, type]:
    """Import the candidate (its directory importable, as in the harness); ``CandidateError`` on failure."""
    try:
        return loader.load_solution(c.path, c.display)
    except LoadError as exc:
        raise CandidateError(load_error_diagnostic(exc, c)) from None


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_PY_ERROR = re.compile(r"^\w+(?:Error|Exception|Warning):")


def load_error_diagnostic(exc: LoadError, c: Candidate) -> dict:
    """One diagnostic for a failed import: the compiler's own (syntax errors, kernel builds) when there is
    one, else the exception with the line of the candidate's innermost frame and the trimmed traceback."""
    compiler = [m for m in exc.messages if m.get("kind") == "compiler"]
    if compiler:
        first = next((m for m in compiler if m.get("severity") == "error"), compiler[0])
        return {
            "severity": first.get("severity") or "error",
            "file": first.get("file"),
            "line": first.get("line"),
            "column": first.get("column"),
            "message": first.get("message") or exc.error,
            "tool": "python" if _PY_ERROR.match(first.get("message") or "") else "compiler",
        }
    tb = next((m["text"] for m in exc.messages if m.get("kind") == "traceback"), "")
    line = None
    for m in _FRAME.finditer(tb):
        if m.group("file") == c.display:
            line = int(m.group("line"))
    out = {
        "severity": "error",
        "file": c.display,
        "line": line,
        "column": None,
        "message": exc.error.removeprefix(f"{c.display}: "),
        "tool": "python",
    }
    if tb:
        out["traceback"] = tb
    return out


def build_model(problem: loader.Problem, cls: type, device: Any, seed: int = 0) -> Any:
    """``cls(*get_init_inputs())`` after ``manual_seed(seed)`` (KernelBench's seed replay), on ``device``."""
    import torch

    init = list(problem.get_init_inputs())
    torch.manual_seed(seed)
    model = cls(*init)
    return model.to(device) if hasattr(model, "to") else model


def task_inputs(problem: loader.Problem, device: Any, seed: int = 0) -> list:
    """The task's forward arguments, from the harness's own input generator."""
    from ..judge.check.inputs import make_inputs  # imports torch: only a tool that builds inputs pays for it

    return make_inputs(problem, seed, "random", device)
