"""The package boundaries of the project (README "Layout"), checked statically and at import time."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels_env", "models", "research", "experiments")
FRAMEWORK = {"hydra", "omegaconf"}
JAX_STACK = {"jax", "jaxlib", "flax", "optax", "orbax", "chex"}
FORBIDDEN = {
    "kernels_env": JAX_STACK | FRAMEWORK | {"models", "research", "experiments"},
    "models": FRAMEWORK | {"research", "kernels_env", "experiments"},
    "research": FRAMEWORK | {"experiments"},
    "experiments": set(),
}
# research speaks to the sandbox only through these modules.
RESEARCH_MAY_USE = {"kernels_env.client", "kernels_env.rules.messages", "kernels_env.session"}


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module a source imports anywhere (also inside functions), relative imports resolved."""
    found: set[str] = set()
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            if stem:
                found.add(stem)
            found.update(f"{stem}.{alias.name}" if stem else alias.name for alias in node.names)
    return found


def violations(package: str, source: str, module: str, is_package: bool = False) -> list[str]:
    bad = []
    for name in sorted(imported_modules(source, module, is_package)):
        top = name.split(".")[0]
        sandbox_internals = (
            package == "research"
            and top == "kernels_env"
            and name != "kernels_env"
            and not any(name == m or name.startswith(m + ".") for m in RESEARCH_MAY_USE)
        )
        if top in FORBIDDEN[package] or sandbox_internals:
            bad.append(name)
    return bad


# Candidate solutions shipped as data (judged inside the sandbox, never imported by the library): like
# examples/solutions/, they may use what a candidate may use (e.g. kernels_env.fastpath).
CANDIDATE_DIRS = (ROOT / "research" / "agent" / "skills" / "examples",)


def _modules(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        if any(d in path.parents for d in CANDIDATE_DIRS):
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        yield path, ".".join(parts), rel.name == "__init__"


@pytest.mark.parametrize("package", PACKAGES)
def test_package_respects_boundaries(package):
    assert (ROOT / package / "__init__.py").exists(), f"{package} is not a package"
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
    assert doc and "import" in doc, f"{package}/__init__.py must say what lives there and what it may import"
    problems = {}
    for path, module, is_package in _modules(package):
        bad = violations(package, path.read_text(), module, is_package)
        if bad:
            problems[str(path.relative_to(ROOT))] = bad
    assert not problems, f"boundary violations: {problems}"


def test_checker_catches_crossings():
    assert violations("kernels_env", "import jax.numpy as jnp", "kernels_env.x") == ["jax.numpy"]
    assert violations("kernels_env", "def f():\n    from research import rl", "kernels_env.x")
    assert violations("kernels_env", "from ...models import policy", "kernels_env.sub.x") == [
        "models",
        "models.policy",
    ]
    assert violations("kernels_env", "from .. import research", "kernels_env", is_package=True) == [
        "research"
    ]
    assert not violations("kernels_env", "from ..models import policy", "kernels_env.sub.x")
    assert violations("models", "from omegaconf import OmegaConf", "models.x")
    assert violations("research", "from kernels_env.runtime.worker import run", "research.x") == [
        "kernels_env.runtime.worker",
        "kernels_env.runtime.worker.run",
    ]
    assert not violations("research", "from kernels_env.client import SandboxClient", "research.x")
    assert not violations("research", "from kernels_env import client", "research.x")
    assert violations("research", "from kernels_env import worker", "research.x") == ["kernels_env.worker"]
    assert not violations("kernels_env", "import torch\nfrom . import protocol", "kernels_env.x")


# The sandbox's internal layering (kernels_env/__init__.py): each part imports only the parts listed for it.
# Top-level modules (client, session, __main__) are parts of their own name.
KERNELS_ENV_LAYERS = {
    "rules": set(),
    "host": {"rules"},
    "fastpath": {"host", "rules"},
    "guard": {"rules", "host"},
    "judge": {"rules", "host", "guard", "fastpath"},
    "tools": {"rules", "host", "guard", "fastpath", "judge"},
    "runtime": {"rules", "host", "guard", "fastpath", "judge", "tools"},
    "session": {"rules", "host", "tools", "client"},
    "client": {"rules", "host", "judge", "runtime", "tools"},
    "reports": {"rules", "host", "guard", "judge", "client"},
    "cli": {"rules", "host", "judge", "runtime", "tools", "client", "session", "reports"},
    "__main__": {"cli"},
}


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "kernels_env" and len(parts) > 1 else None


def layering_violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """Imports of another kernels_env part that the module's own part may not use."""
    own = _part(module)
    if own is None:
        return []
    allowed = KERNELS_ENV_LAYERS[own] | {own}
    return sorted(
        name
        for name in imported_modules(source, module, is_package)
        if _part(name) is not None and _part(name) not in allowed and name != "kernels_env"
    )


def test_kernels_env_parts_are_all_layered():
    parts = {p.name if p.is_dir() else p.stem for p in (ROOT / "kernels_env").iterdir()}
    parts = {p for p in parts if not p.startswith((".", "_")) or p == "__main__"}
    assert parts - {"__pycache__"} == set(KERNELS_ENV_LAYERS), "a new kernels_env part needs a layering rule"


def test_kernels_env_internal_layering():
    problems = {}
    for path, module, is_package in _modules("kernels_env"):
        bad = layering_violations(path.read_text(), module, is_package)
        if bad:
            problems[str(path.relative_to(ROOT))] = bad
    assert not problems, f"layering violations (see KERNELS_ENV_LAYERS): {problems}"


def test_layering_checker_catches_crossings():
    assert layering_violations("from ..judge.run import harness", "kernels_env.rules.config") == [
        "kernels_env.judge.run",
        "kernels_env.judge.run.harness",
    ]
    assert layering_violations("from ...client import SandboxClient", "kernels_env.judge.build.loader")
    assert layering_violations("from ...runtime.supervisor import Worker", "kernels_env.judge.run.harness")
    assert layering_violations("from ..judge.loader import load", "kernels_env.guard._checks")
    assert layering_violations("from ..cli.audit import run", "kernels_env.reports.audit")
    assert not layering_violations("from ...rules.result import CORRECT", "kernels_env.judge.run.harness")
    assert not layering_violations("from . import compare", "kernels_env.judge", is_package=True)


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_kernels_env_never_loads_jax_at_runtime():
    """Transitive imports count too: import every kernels_env module in a fresh interpreter."""
    modules = [m for _, m, _ in _modules("kernels_env") if not m.endswith("__main__")]
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in "
        f"{sorted(JAX_STACK | FRAMEWORK | {'models', 'research'})!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_experiments_are_thin():
    for path, _, _ in _modules("experiments"):
        if path.name.startswith("_"):
            continue
        lines = path.read_text().splitlines()
        assert len(lines) <= 100, f"{path.name} has {len(lines)} lines; experiments stay <= 100 lines"


# Inside research: packages other research packages build on never import those (research/*/__init__.py).
# research.rollout is the contract between environments and learner: the standard library only.
RESEARCH_MAY_NOT = {
    "toyenv": {"research.rl", "research.agent"},
    "rollout": {"research", "models", "kernels_env", "numpy", *JAX_STACK},
}


def research_violations(source: str, module: str, is_package: bool = False) -> list[str]:
    sub = module.split(".")[1] if module.count(".") else None
    own = f"research.{sub}"
    banned = RESEARCH_MAY_NOT.get(sub, set())
    return sorted(
        name
        for name in imported_modules(source, module, is_package)
        if not (name == own or name.startswith(own + "."))
        and any(name == b or name.startswith(b + ".") for b in banned)
    )


def test_research_packages_others_build_on_stay_below_them():
    problems = {}
    for path, module, is_package in _modules("research"):
        bad = research_violations(path.read_text(), module, is_package)
        if bad:
            problems[str(path.relative_to(ROOT))] = bad
    assert not problems, f"research boundary violations (see RESEARCH_MAY_NOT): {problems}"
    assert research_violations("from research.rl import pipeline", "research.toyenv.rollout") == [
        "research.rl",
        "research.rl.pipeline",
    ]
    assert research_violations("from ..agent import tools", "research.toyenv.x") == [
        "research.agent",
        "research.agent.tools",
    ]
    assert research_violations("import numpy as np", "research.rollout._trajectory") == ["numpy"]
    assert not research_violations("from .rollout import ToyEnv", "research.toyenv", is_package=True)
    assert not research_violations("from research.rollout import Trajectory", "research.toyenv.rollout")
    assert not research_violations("from . import _trajectory", "research.rollout", is_package=True)
