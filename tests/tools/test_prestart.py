"""The pre-started profiling process (``kernels_env.tools._prestart``) on CPU: a later call runs in the
process started before it, with the same results as a fresh process; a dead or stale process is replaced;
the job's timeout starts at hand-over; request hygiene leaves it alone; closing (or the owner dying) leaves
no process. ncu mode uses a fake ncu that runs its target as a child and writes a recorded CSV as its log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from tools_fixtures import PROBLEMS

from kernels_env.tools import ToolContext, _prestart, _profile
from kernels_env.tools._ncu import find_ncu, ncu_command
from kernels_env.tools._prestart import LOG_FILE, PRESTARTER, Launch

DOC_CSV = Path(__file__).parent / "fixtures" / "documented" / "ncu_raw_wide.csv"
SOL = "import os, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"


@pytest.fixture
def prestart(monkeypatch):
    monkeypatch.setenv(_prestart.ENABLE_ENV, "1")
    yield PRESTARTER
    PRESTARTER.close()


@pytest.fixture
def args(tmp_path):
    (tmp_path / "sol.py").write_text(SOL)
    return {"reference": str(PROBLEMS / "ref_small.py"), "solution": str(tmp_path / "sol.py")}


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """ncu's shape: the target is its child; its report (a recorded CSV) lands in --log-file afterwards."""
    ncu = tmp_path / "ncu"
    ncu.write_text(
        textwrap.dedent(f"""\
            #!{sys.executable}
            import shutil, subprocess, sys
            argv = sys.argv[1:]
            log = argv[argv.index("--log-file") + 1]
            rc = subprocess.call(argv[argv.index("-m") - 1 :])
            shutil.copy({str(DOC_CSV)!r}, log)
            sys.exit(rc)
            """)
    )
    ncu.chmod(0o755)
    monkeypatch.setenv("KERNELS_ENV_NCU", str(ncu))
    real = _profile.target_argv
    # no GPU here: the range mode's job on the CPU, without the NVTX range ("once")
    monkeypatch.setattr(
        _profile, "target_argv", lambda a, w, _m, r, wu, it, device="": real(a, w, "once", r, wu, it, "cpu")
    )
    return str(ncu)


def _events(args: dict) -> dict:
    ctx = ToolContext()
    try:
        return _profile._events_in_target(args, ctx, 1, 2, True, "cpu")
    finally:
        ctx.cleanup()


def _kernels(out: dict) -> dict:
    return {
        side: [(k["short_name"], k["launches"]) for k in out[side]["kernels"]]
        for side in ("reference", "candidate")
    }


def _tree(pid: int) -> list[int]:
    try:
        return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return []


def _waiting(proc) -> bool:
    """The pre-started target finished its imports: a process of its tree holds its FIFO open."""
    for pid in _tree(proc.proc.pid):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(proc.fifo):
                    return True
            except OSError:
                pass
    return False


def _wait_for(cond, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _gone(pids: list[int]) -> bool:
    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    return not any(running(p) for p in pids)


@pytest.mark.integration  # a subprocess or sandbox worker, ~27 s
def test_second_call_runs_in_the_prestarted_process_with_the_cold_results(prestart, args, monkeypatch):
    monkeypatch.setenv(_prestart.ENABLE_ENV, "0")
    cold = _events(args)
    assert not cold["target_prestarted"] and prestart.ready is None and cold["target_prestart_s"] is None
    monkeypatch.setenv(_prestart.ENABLE_ENV, "1")
    first = _events(args)
    ready = prestart.ready
    assert not first["target_prestarted"] and ready is not None and ready.proc.poll() is None
    created, before = psutil.Process(ready.proc.pid).create_time(), time.time()
    second = _events(args)
    assert second["target_prestarted"] and created < before
    assert second["target_prestart_s"]["import_s"] > 0 and second["target_stages_s"]["import"] < 0.5
    assert _kernels(cold) == _kernels(first) == _kernels(second)
    assert prestart.ready is not ready and _gone([ready.proc.pid])  # consumed: the next one is started
    # the job ran in that very process (its pid in the target's status)
    result = Path(args["solution"]).parent / "r.json"
    env = _profile.target_env()
    launch = Launch.of([], env)
    waiting = prestart.ready.proc.pid
    argv = _profile.target_argv(args, "candidate", "once", result, 0, 1, "cpu")[3:]
    run = prestart.run(launch, argv, env, 60)
    assert run.prestarted and run.result.returncode == 0 and json.loads(result.read_text())["pid"] == waiting


@pytest.mark.integration  # a subprocess or sandbox worker, ~36 s
def test_a_killed_or_stale_prestarted_process_is_replaced(prestart, args, monkeypatch, tmp_path):
    _events(args)
    os.kill(prestart.ready.proc.pid, signal.SIGKILL)
    out = _events(args)  # dead: the job runs in a fresh process, and succeeds
    assert not out["target_prestarted"] and out["candidate"]["kernels"]
    assert prestart.ready is not None and prestart.ready.proc.poll() is None
    # a variable read only once the candidate loads travels with the job: still the pre-started process,
    # and the candidate sees the job's value
    seen = tmp_path / "seen.txt"
    Path(args["solution"]).write_text(
        SOL + f"open({str(seen)!r}, 'w').write(os.environ['TORCH_EXTENSIONS_DIR'])\n"
    )
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext-a"))
    assert _events(args)["target_prestarted"] and seen.read_text() == str(tmp_path / "ext-a")
    # any other difference in the environment makes it stale: replaced (killed) and run fresh
    stale = prestart.ready
    monkeypatch.setenv("KERNELS_ENV_SOMETHING_ELSE", "1")
    assert not _events(args)["target_prestarted"] and _gone(_tree(stale.proc.pid) or [stale.proc.pid])


@pytest.mark.integration  # a subprocess or sandbox worker, ~14 s
def test_ncu_mode_prestarted_matches_cold_and_gets_a_fresh_timeout(prestart, args, fake_ncu, monkeypatch):
    from kernels_env.judge.run import hygiene

    def ncu_run(time_s: float = 120.0) -> dict:
        ctx = ToolContext(limits=_profile_limits(time_s))
        try:
            return _profile._run_ncu(args, ctx, "both", 1, 1, 129)
        finally:
            ctx.cleanup()

    monkeypatch.setenv(_prestart.ENABLE_ENV, "0")
    cold = ncu_run()
    monkeypatch.setenv(_prestart.ENABLE_ENV, "1")
    ncu_run()
    ready = prestart.ready
    assert ready.launch.wrapper[0] == find_ncu() and LOG_FILE in ready.launch.wrapper
    _wait_for(lambda: _waiting(ready))
    tree = _tree(ready.proc.pid)
    # hygiene after an evaluation must not take the waiting ncu (or its target) for a candidate's leftover
    assert len(tree) == 2 and not set(tree) & hygiene.child_processes()
    time.sleep(max(0.0, 4.0 - (time.monotonic() - ready.started)))  # older than the next call's limit
    warm = ncu_run(time_s=4.0)
    assert warm["attempts"][0]["prestarted"] and not cold["attempts"][0]["prestarted"]
    assert warm["target"]["ok"] and cold["target"]["ok"] and warm["records"] == cold["records"]
    assert len(cold["records"]) == 3 and warm["target"]["pid"] == tree[1]  # the waiting ncu's target ran it
    assert _gone(tree)
    # where the seconds went: the warm call found its process ready (no import to wait for); its parts add
    # up to its wall time; the cold one has no ready wait to report
    line, cold_line = warm["attempts"][0]["timeline_s"], cold["attempts"][0]["timeline_s"]
    assert 0 <= line["ready_wait_s"] < 1.0 and line["job_s"] > 0 and line["exit_tail_s"] >= 0
    assert abs(line["ready_wait_s"] + line["job_s"] + line["exit_tail_s"] - line["wall_s"]) < 0.01
    assert "ready_wait_s" not in cold_line and 0 <= cold_line["exit_tail_s"] < cold_line["wall_s"]


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_close_and_a_dead_owner_leave_no_process(prestart, fake_ncu, tmp_path):
    env = _profile.target_env()
    wrapper = ncu_command(find_ncu(), [], LOG_FILE)
    proc = _prestart._Process(Launch.of(wrapper, env))
    _wait_for(lambda: len(_tree(proc.proc.pid)) >= 2)  # the fake ncu and its target
    tree = _tree(proc.proc.pid)
    prestart.ready = proc
    prestart.close()
    assert prestart.ready is None and _gone(tree) and not proc.dir.exists()
    assert proc.proc.pid not in _prestart.OWN_SESSIONS
    # an owner that dies without closing (a crashed worker): the target sees its FIFO close and exits
    owner = tmp_path / "owner.py"
    owner.write_text(
        textwrap.dedent(f"""\
            import os, sys
            from kernels_env.tools import _prestart
            from kernels_env.tools._profile import target_env
            proc = _prestart._Process(_prestart.Launch.of({wrapper!r}, target_env()))
            print(proc.proc.pid, proc.dir, flush=True)
            os._exit(0)
            """)
    )
    root = str(Path(_profile.__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, str(owner)], capture_output=True, text=True, cwd=root, env=env)
    pid, folder = out.stdout.split()
    _wait_for(lambda: _gone([int(pid)]), 180)
    assert not Path(folder).exists()


def _profile_limits(time_s: float):
    from kernels_env.tools import ToolLimits

    return ToolLimits(time_s=time_s)
