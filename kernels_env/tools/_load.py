"""Load a KernelBench reference and a candidate (a ``.py`` solution or a workspace directory) in this process.

Overlaps with the sandbox core's loader (kernels_env/loader); kept here so the tools do not depend on its
internals. Only ever called inside a tool process (worker or spawned child), never in the caller's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

SOLUTION_FILE = "model_new.py"


@dataclass(frozen=True)
class Solution:
    path: Path  # the Python file that defines ModelNew
    root: Path  # directory the candidate's relative paths resolve against (workspace or the file's dir)
    is_workspace: bool


def resolve_solution(solution: str | os.PathLike) -> Solution:
    p = Path(solution).expanduser().resolve()
    if p.is_dir():
        f = p / SOLUTION_FILE
        if not f.is_file():
            raise FileNotFoundError(f"workspace {p} has no {SOLUTION_FILE}")
        return Solution(f, p, True)
    if not p.is_file():
        raise FileNotFoundError(f"solution not found: {p}")
    return Solution(p, p.parent, False)


@contextlib.contextmanager
def in_directory(root: Path):
    """cwd and sys.path[0] at ``root`` so the candidate's ``open('kernels/x.cu')`` and local imports work."""
    old_cwd, old_path = os.getcwd(), list(sys.path)
    os.chdir(root)
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        os.chdir(old_cwd)
        sys.path[:] = old_path


def load_module(path: str | os.PathLike, prefix: str = "kernels_env_user"):
    path = Path(path).resolve()
    name = f"{prefix}_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_reference(path: str | os.PathLike):
    mod = load_module(path, "kernels_env_ref")
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, attr):
            raise AttributeError(f"reference {path} does not define {attr} (KernelBench format)")
    return mod


def load_solution(sol: Solution):
    with in_directory(sol.root):
        mod = load_module(sol.path, "kernels_env_sol")
    if not hasattr(mod, "ModelNew"):
        raise AttributeError(f"{sol.path.name} does not define class ModelNew")
    return mod


def to_device(obj, device):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def build(ref_mod, cls, device, seed: int = 42):
    """KernelBench's seed replay: seed, then construct (same parameters in the same order -> same weights)."""
    import torch

    init = ref_mod.get_init_inputs()
    torch.manual_seed(seed)
    model = cls(*init)
    return model.to(device) if hasattr(model, "to") else model


def make_inputs(ref_mod, device, seed: int = 0):
    import torch

    torch.manual_seed(seed)
    return to_device(list(ref_mod.get_inputs()), device)
