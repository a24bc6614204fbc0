"""The test tiers themselves (tests/_tiers.py): the guard that keeps processes out of the fast tier, the
automatic marks, and the Makefile / pyproject agreeing on them."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import _tiers
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "start",
    [
        lambda: subprocess.run(["true"], check=False),
        lambda: subprocess.Popen(["true"], close_fds=False),  # may take subprocess's posix_spawn path
        lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
        lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    ],
    ids=["subprocess.run", "popen_no_close_fds", "mp_spawn", "mp_fork"],
)
def test_the_guard_refuses_every_way_of_starting_a_process_and_records_it(start):
    saved = (subprocess._fork_exec, os.fork, os.posix_spawn)
    with _tiers.ProcessGuard() as guard, pytest.raises(RuntimeError, match="mark it integration"):
        start()
    assert guard.started, "the attempt was not recorded"
    assert (subprocess._fork_exec, os.fork, os.posix_spawn) == saved  # restored on exit


def test_a_swallowed_refusal_is_still_recorded():
    with _tiers.ProcessGuard() as guard, contextlib.suppress(Exception):  # code that hides the error
        subprocess.run(["true"], check=False)
    assert guard.started and "true" in guard.started[0]


class _Item(SimpleNamespace):
    def add_marker(self, mark):
        self.marks.append(mark.name)

    def get_closest_marker(self, name):
        return name if name in self.marks else None


def _item(path: str, fixtures=()):
    config = SimpleNamespace(rootpath=ROOT)
    return _Item(path=ROOT / path, fixturenames=list(fixtures), config=config, marks=[])


def test_tiers_are_assigned_by_fixture_and_module():
    items = {
        "client": _item("tests/sandbox/test_verdicts.py", ["client", "tmp_path"]),
        "sandbox_module": _item("tests/sandbox/test_isolation.py"),
        "sandbox_logic": _item("tests/sandbox/test_summary.py"),
        "agent_fixture": _item("tests/agent/test_episode.py", ["sandbox"]),
        "plain": _item("tests/rl/test_losses.py", ["tmp_path"]),
        "soak": _item("tests/stress/test_soak.py"),
        "bench": _item("tests/rl/test_metrics_bench.py"),
    }
    _tiers.assign(list(items.values()))
    assert items["client"].marks == ["integration"] and items["agent_fixture"].marks == ["integration"]
    assert items["sandbox_module"].marks == ["integration"]
    assert items["sandbox_logic"].marks == [] and items["plain"].marks == []
    assert items["soak"].marks == ["e2e"] and items["bench"].marks == ["e2e"]
    assert _tiers.in_fast_tier(items["plain"]) and not _tiers.in_fast_tier(items["client"])


def _recipe(makefile: str, target: str) -> str:
    return makefile.split(f"\n{target}:")[1].split("\n\n")[0]


def test_makefile_and_pyproject_agree_on_the_tiers():
    makefile = (ROOT / "Makefile").read_text()
    fast = re.search(r"^FAST_TIER := (.+)$", makefile, re.M).group(1)
    excluded = set(re.findall(r"\w+", fast)) - {"not", "or", "and"}
    assert excluded == {"integration", "e2e", "slow", "toolchain", "gpu"}
    assert '-m "$(FAST_TIER)"' in _recipe(makefile, "test")
    assert '-m "not toolchain"' in _recipe(makefile, "test-all")  # every other tier
    assert "-m toolchain" in _recipe(makefile, "test-toolchain")
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert all(f'"{m}:' in pyproject for m in excluded)
    assert "make test-all" in (ROOT / ".ci" / "run").read_text()


def test_fixture_and_module_lists_name_things_that_exist():
    for pattern in (*_tiers.INTEGRATION_MODULES, *_tiers.FAST_MODULES, *_tiers.E2E_MODULES):
        assert list(ROOT.glob(pattern)), f"{pattern} matches no test module"
    defined = set()
    for conftest in ROOT.glob("tests/**/conftest.py"):
        defined |= set(re.findall(r"@pytest\.fixture[^\n]*\ndef (\w+)\(", conftest.read_text()))
    assert _tiers.INTEGRATION_FIXTURES <= defined, _tiers.INTEGRATION_FIXTURES - defined
