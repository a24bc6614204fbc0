"""Who is running: attribute a Python frame to the candidate, the reference, a kernel runtime or the judge.

The guard names the candidate frame that caused a violation, treats the Triton interpreter's own data
movement as runtime work rather than candidate compute, and fires introspection checks only for calls made
by candidate code. Attribution is by the code object's file name.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import sys
import sysconfig
from collections.abc import Iterable
from types import FrameType

CANDIDATE = "candidate"
REFERENCE = "reference"
RUNTIME = "runtime"  # kernel runtimes a solution legitimately calls (Triton, CuPy, our fast path)
TORCH = "torch"
JUDGE = "judge"  # kernels_env outside the fast path, including this guard
STDLIB = "stdlib"
LIBRARY = "library"  # any other installed package

# .../kernels_env: every module of the sandbox is judge code (protected from writes, never the candidate's)
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _package_dir(name: str) -> str | None:
    """Where an installed package lives, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    return os.path.abspath(locations[0]) + os.sep if locations else None


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get("stdlib"), paths.get("platstdlib")}
    return tuple(os.path.abspath(d) + os.sep for d in dirs if d)


def _site_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get("purelib"), paths.get("platlib")}
    dirs.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(os.path.abspath(d) + os.sep for d in dirs if d)


class FrameClassifier:
    """Classify code file names. ``candidate_paths`` (files or directories) pin down the candidate exactly;
    without them, any code outside the standard library, installed packages and ``kernels_env`` counts as
    candidate code (the sandbox loads solutions from their own workspace)."""

    def __init__(self, candidate_paths: Iterable[str] | None = None, reference_paths: Iterable[str] = ()):
        self._candidate = tuple(os.path.abspath(p) for p in candidate_paths) if candidate_paths else None
        self._reference = tuple(os.path.abspath(p) for p in reference_paths)
        self._cache: dict[str, str] = {}
        import torch

        self._torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
        runtime = [os.path.join(PACKAGE_DIR, "fastpath") + os.sep]
        for name in ("triton", "cupy", "cupy_backends", "cupyx"):
            spec_dir = _package_dir(name)
            if spec_dir:
                runtime.append(spec_dir)
        self._runtime = tuple(runtime)
        self._judge = PACKAGE_DIR + os.sep
        self._stdlib = _stdlib_dirs()
        self._site = _site_dirs()

    def add_runtime_dir(self, path: str) -> None:
        self._runtime = (*self._runtime, os.path.abspath(path) + os.sep)
        self._cache.clear()

    def classify(self, filename: str) -> str:
        kind = self._cache.get(filename)
        if kind is None:
            kind = self._cache[filename] = self._classify(filename)
        return kind

    @staticmethod
    def _within(path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r + os.sep) for r in roots)

    def _classify(self, filename: str) -> str:
        if filename.startswith("<"):
            # <frozen ...>, <string> (dataclass/namedtuple codegen, exec): never the frame to blame.
            return STDLIB
        path = os.path.abspath(filename)
        if self._reference and self._within(path, self._reference):
            return REFERENCE
        if self._candidate is not None and self._within(path, self._candidate):
            return CANDIDATE
        if any(path.startswith(r) for r in self._runtime):
            return RUNTIME
        if path.startswith(self._torch_dir):
            return TORCH
        if path.startswith(self._judge):
            return JUDGE
        if any(path.startswith(s) for s in self._site):
            return LIBRARY
        if any(path.startswith(s) for s in self._stdlib):
            return STDLIB
        return CANDIDATE if self._candidate is None else LIBRARY

    def user_frame(
        self, frame: FrameType | None, skip: Iterable[str] = (TORCH, JUDGE, STDLIB)
    ) -> tuple[FrameType | None, str]:
        """The innermost frame at or above ``frame`` whose kind is not in ``skip``, and its kind."""
        skip = set(skip)
        while frame is not None:
            kind = self.classify(frame.f_code.co_filename)
            if kind not in skip:
                return frame, kind
            frame = frame.f_back
        return None, ""

    def find(self, frame: FrameType | None, kinds: Iterable[str], limit: int = 200) -> FrameType | None:
        """The innermost frame at or above ``frame`` of one of ``kinds`` (e.g. any candidate frame)."""
        kinds = set(kinds)
        while frame is not None and limit:
            if self.classify(frame.f_code.co_filename) in kinds:
                return frame
            frame, limit = frame.f_back, limit - 1
        return None


def describe(frame: FrameType | None) -> str:
    """``file:line in function: source`` for evidence; empty for no frame."""
    if frame is None:
        return ""
    code = frame.f_code
    src = linecache.getline(code.co_filename, frame.f_lineno).strip()
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}" + (f": {src}" if src else "")
