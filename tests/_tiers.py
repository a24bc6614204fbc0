"""The test tiers: which tests `make test` (the fast tier) runs, and the guard that keeps it fast.

Markers (pyproject.toml):
- ``integration``: starts sandbox workers, a subprocess or a multi-device JAX process. Assigned here at
  collection to every test that uses a fixture in ``INTEGRATION_FIXTURES`` or lives in a module of
  ``INTEGRATION_MODULES``; any other test is run under a guard that fails it, naming the process, if it starts
  one anyway (so a new test that starts processes cannot slip into the fast tier unnoticed).
- ``e2e``: soak runs and benchmark smoke runs (``E2E_MODULES``): whole programs end to end.
- ``slow``: a single test that needs more than about 10 s of CPU in-process (a model compiled, a pipeline
  run), marked by hand next to the test.
- ``toolchain``: full PyTorch C++/CUDA extension builds (load_inline over torch/extension.h, PCH, lean
  headers), minutes each (serial compiler work: six took 9 min on a 16-core host), marked by hand:
  `make test-toolchain`; left out of `make test-all` so CI stays under an hour.
- ``gpu``: needs a CUDA device (skipped without one).

`make test` runs the fast tier (the Makefile's FAST_TIER: none of the above); `make test-all` runs every tier
but ``toolchain`` (what CI runs).
"""

from __future__ import annotations

import _posixsubprocess
import fnmatch
import os
import subprocess

import pytest

# Fixtures that start sandbox workers (a SandboxClient), a subprocess or a multi-device JAX process.
INTEGRATION_FIXTURES = frozenset(
    {
        "client",  # tests/sandbox: a CPU-mode SandboxClient
        "sandbox",  # tests/agent, tests/toyenv: a CPU-mode SandboxClient
        "tools_client",  # tests/tools
        "judged_set",  # tests/evaluation: a solution set judged in the sandbox
        "multirun",  # tests/evaluation: a real Hydra multirun in a subprocess
        "sharded_report",  # tests/models, tests/rl: the 8-device JAX subprocess
        "pipeline_mesh_report",  # tests/rl: the 8-device pipeline subprocess
        "redteam_tree",  # tests/redteam: the corpus judged in the sandbox
    }
)

# Modules whose every test starts processes of its own (not through one of the fixtures above).
INTEGRATION_MODULES = (
    "tests/sandbox/test_*.py",  # judged in a SandboxClient each file starts (pure-logic files: FAST_MODULES)
    "tests/fastpath/test_build.py",  # nvcc builds
    "tests/rl/test_distributed.py",  # two JAX processes
    "tests/rl/test_resume.py",  # SIGKILL of a training subprocess
    "tests/test_notebooks.py",  # each notebook runs as a script
    "tests/evaluation/test_notebooks.py",
)
# tests/sandbox files that test pure logic in-process (no worker): they stay in the fast tier.
FAST_MODULES = (
    "tests/sandbox/test_compare.py",
    "tests/sandbox/test_compare_fuzz.py",
    "tests/sandbox/test_summary.py",
    "tests/sandbox/test_timing.py",
    "tests/sandbox/test_protocol.py",
    "tests/sandbox/test_conditioning.py",
    "tests/sandbox/test_loader.py",
    "tests/sandbox/test_cache.py",
    "tests/sandbox/test_preflight.py",
    "tests/sandbox/test_toolchains.py",
    "tests/sandbox/test_backends.py",  # its one sandbox test uses the `client` fixture: integration by that
    "tests/sandbox/test_batch.py",  # resume planning and verdict lines against in-process fake clients
    "tests/sandbox/test_idle_workers.py",  # the pools' hand-out loop with stand-in workers
)
E2E_MODULES = (
    "tests/stress/test_*.py",  # the soak and any other stress test
    "tests/agent/test_benchmark_smoke.py",
    "tests/*/test_*_bench.py",
    "tests/fastpath/test_benchmark.py",
)


def _rel(item) -> str:
    return os.path.relpath(str(item.path), str(item.config.rootpath)).replace(os.sep, "/")


def _matches(path: str, patterns) -> bool:
    return any(fnmatch.fnmatch(path, p) for p in patterns)


def assign(items) -> None:
    """Mark each collected item with its tier (before -m deselects)."""
    for item in items:
        path = _rel(item)
        if _matches(path, E2E_MODULES):
            item.add_marker(pytest.mark.e2e)
            continue
        uses = set(getattr(item, "fixturenames", ()))
        module_level = _matches(path, INTEGRATION_MODULES) and not _matches(path, FAST_MODULES)
        if module_level or uses & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)


def in_fast_tier(item) -> bool:
    return not any(item.get_closest_marker(m) for m in ("integration", "e2e", "slow", "toolchain", "gpu"))


class ProcessGuard:
    """While a fast-tier test runs, starting a process (subprocess, multiprocessing, os.fork, posix_spawn)
    raises and is recorded, so the test fails even where the code under test swallows the error."""

    def __init__(self):
        self.started: list[str] = []
        self._saved: list[tuple[object, str, object]] = []

    def _refuse(self, what):
        def refuse(*args, **kwargs):
            argv = args[0] if args and what.endswith("fork_exec") else args[:1]
            self.started.append(f"{what}({_describe(argv)})")
            raise RuntimeError(
                f"a fast-tier test started a process ({what}); mark it integration (tests/_tiers.py)"
            )

        return refuse

    def __enter__(self):
        # subprocess keeps its own alias of fork_exec; multiprocessing calls _posixsubprocess's
        targets = [(subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec")]
        targets += [(os, "fork"), (os, "posix_spawn"), (os, "posix_spawnp")]
        for owner, name in targets:
            if hasattr(owner, name):
                self._saved.append((owner, name, getattr(owner, name)))
                setattr(owner, name, self._refuse(name))
        return self

    def __exit__(self, *exc):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        return False


def _describe(argv) -> str:
    try:
        words = [os.fsdecode(a) for a in argv][:3]
    except TypeError:
        return "?"
    return " ".join(w if len(w) < 60 else "..." + w[-40:] for w in words)
