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


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_kernel_runtimes_may_spawn_their_compilers_during_forward():
    """Triton runs ptxas (and cc for its driver helper) on a kernel's first launch, inside forward."""
    import os

    import triton

    spawn = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
    w = _watch()
    runtime_file = os.path.join(os.path.dirname(triton.__file__), "backends", "_as_if_ptxas.py")
    with w:
        exec(compile(spawn, runtime_file, "exec"), {})  # a frame in Triton's package
    assert w.violations == []


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


def test_the_judges_reply_channel_cannot_be_opened():
    """The worker's protocol descriptors (kernels_env.rules.messages.CHANNEL_FDS): by number or via /proc."""
    import os

    from kernels_env.rules import messages

    read_fd, write_fd = os.pipe()
    messages.CHANNEL_FDS.add(write_fd)
    try:
        for target in (write_fd, f"/proc/self/fd/{write_fd}", f"/dev/fd/{write_fd}"):
            w = _watch()
            with w, pytest.raises(GuardViolation):
                kwargs = {"closefd": False} if isinstance(target, int) else {}
                open(target, "wb", **kwargs).close()  # noqa: SIM115 - refused before it opens
            assert w.violations[0].check == _checks.PROTOCOL_FORGERY, target
        w = _watch()
        with w, open(f"/proc/self/fd/{read_fd}", "rb"):  # any other descriptor: not the judge's business
            pass
        assert not w.violations
    finally:
        messages.CHANNEL_FDS.discard(write_fd)
        os.close(read_fd)
        os.close(write_fd)


def test_raw_process_memory_cannot_be_opened():
    w = _watch()
    with w, pytest.raises(GuardViolation):
        open("/proc/self/mem", "rb").close()  # noqa: SIM115 - refused before it opens
    assert w.violations[0].check == _checks.INTROSPECTION


def test_may_catch_reads_the_candidates_sources(tmp_path):
    from kernels_env.guard import _watch as watch_module

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "model_new.py").write_text("def forward(x):\n    return [v for v in x]\n")
    assert not watch_module.may_catch([str(plain)])
    for body in ("try:\n    f()\nexcept Exception:\n    pass\n", "with open('x') as f:\n    pass\n"):
        other = tmp_path / f"case{len(body)}"
        other.mkdir()
        (other / "helper.py").write_text(body)
        assert watch_module.may_catch([str(other)])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x.py").write_text("def (:\n")
    assert watch_module.may_catch([str(broken)])  # unreadable: assume it can
    watch_module.COMPILED_BY_CANDIDATE.add(str(plain / "model_new.py"))
    try:
        assert watch_module.may_catch([str(plain)])  # it compiled code of its own at run time
    finally:
        watch_module.COMPILED_BY_CANDIDATE.discard(str(plain / "model_new.py"))


def test_code_compiled_by_candidate_code_is_noted():
    from kernels_env.guard import _watch as watch_module

    with _watch():
        exec(compile("x = 1", "<hidden>", "exec"), {})
    assert __file__ in watch_module.COMPILED_BY_CANDIDATE
    watch_module.COMPILED_BY_CANDIDATE.discard(__file__)


def test_violations_name_the_candidate_frame_and_their_evidence():
    """Each audit tripwire records its check, message and evidence with the candidate's frame."""
    import json

    w = _watch()
    with w, pytest.raises(GuardViolation):
        json.dumps.__code__ = json.dumps.__code__
    (v,) = w.violations
    assert v.check == _checks.JUDGE_TAMPERED and v.message == "candidate replaced __code__ of 'dumps'"
    assert list(v.evidence) == ["frame"] and __file__ in v.evidence["frame"]
    w = _watch()
    with w, pytest.raises(GuardViolation):
        gc.get_objects()
    (v,) = w.violations
    assert v.check == _checks.INTROSPECTION and v.message == "candidate called gc.get_objects"
    assert v.evidence["event"] == "gc.get_objects" and __file__ in v.evidence["frame"]
