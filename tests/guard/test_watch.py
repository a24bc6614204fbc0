"""Audit-hook tripwires: attribution to candidate code, blocking, and the load phase."""

from __future__ import annotations

import gc
import inspect
import logging
import sys

import pytest

from kernels_env.guard import GuardViolation, _checks, load_guard
from kernels_env.guard._frames import FrameClassifier
from kernels_env.guard._watch import FORWARD, Watch


def _watch(**kw):
    return Watch(FrameClassifier([__file__]), FORWARD, trace_exceptions=False, **kw)


@pytest.mark.parametrize(
    "name,call",
    [
        ("gc", lambda: gc.get_objects()),
        ("getframe", lambda: sys._getframe(0)),
        ("inspect", lambda: inspect.currentframe()),
        ("traceback frames", lambda: _tb_frame()),
    ],
)
def test_candidate_introspection_is_blocked(name, call):
    w = _watch()
    with w, pytest.raises(GuardViolation):
        call()
    assert w.violations and w.violations[0].check == _checks.INTROSPECTION


def _tb_frame():
    try:
        raise ValueError
    except ValueError as exc:
        return exc.__traceback__.tb_frame


def test_libraries_may_introspect():
    w = _watch()
    with w:
        logging.getLogger("guard-test").warning("logging walks frames itself")
        inspect.signature(_tb_frame)
    assert w.violations == []


def test_spawning_a_process_during_forward():
    import subprocess

    w = _watch()
    with w, pytest.raises(GuardViolation):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    assert w.violations[0].check == _checks.SUBPROCESS


def test_load_guard_records_without_raising_outside(tmp_path):
    protected = tmp_path / "problem.py"
    protected.write_text("x = 1\n")
    with load_guard(candidate_paths=[__file__], protected_paths=[str(tmp_path)]) as found:
        with pytest.raises(GuardViolation):
            protected.write_text("x = 2\n")
        with pytest.raises(GuardViolation):
            gc.get_objects()
    assert [v.check for v in found] == [_checks.VERIFIER_WRITE, _checks.INTROSPECTION]
    assert protected.read_text() == "x = 1\n"
