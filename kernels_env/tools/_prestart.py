"""A pre-started profiling process: the ``profile`` tool's target (``_target``), already started (under ncu in
ncu mode) and past its imports, waiting for its job; a call hands it the job and pre-starts the next one.

A fresh target spends ~3 s importing torch before profiling anything (``docs/results/tool_latency.md``);
a run worker hosts one waiting process so a later call skips that. The process blocks reading a FIFO before
any kernel launch (its CUDA context already made, outside ncu's NVTX range), so ncu (which launched it)
profiles nothing until the job runs inside the NVTX range. One process per job: an ncu-launched process
ends with its report.

Safety: a process is reused only for a call with the same launch (profiler command and environment; the
variables in ``LATE_ENV``, read only once a candidate is loaded, travel with the job); a dead or stale one is
replaced, a job that the process did not acknowledge runs in a fresh one; the job's timeout starts when it is
handed over. The waiting process exits on its own when its owner goes away (the FIFO's writer closes);
``close`` kills it (the run worker calls it at shutdown). Its session is registered in
``host.processes.OWN_SESSIONS`` so request hygiene never takes it for a candidate's leftover. Enabled in run
workers by ``SandboxConfig.prestart_profiler`` (``$KERNELS_ENV_PROFILE_PRESTART``); off elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..host.processes import OWN_SESSIONS, kill_tree
from ._context import CmdResult, _tail

ENABLE_ENV = "KERNELS_ENV_PROFILE_PRESTART"
# Set per request by the client (TORCH_EXTENSIONS_DIR differs for every solution) and read only when a
# candidate is loaded or built, never at import: a job sets them, so they do not make a process stale.
LATE_ENV = frozenset(
    {
        "TORCH_EXTENSIONS_DIR",
        "TORCH_CUDA_ARCH_LIST",
        "KERNELS_ENV_CACHE_DIR",
        "KERNELS_ENV_SANDBOX_CACHE",
        "KERNELS_ENV_CUDA_ARCH",
    }
)
LOG_FILE = "{log_file}"  # in a launch's profiler command: the process's own log file (ncu --log-file)
_MODULE = "kernels_env.tools._target"
_MAX_BYTES = 4_000_000  # of each output stream, as ``run_cmd`` keeps


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "0") == "1"


@dataclass(frozen=True)
class Launch:
    """What a target is started with, before it knows its job; equal launches can share a process."""

    wrapper: tuple[str, ...]  # the profiler's command before the target (LOG_FILE for its log), or ()
    env: tuple[tuple[str, str], ...]  # without LATE_ENV

    @classmethod
    def of(cls, wrapper: list[str], env: dict[str, str]) -> Launch:
        return cls(tuple(wrapper), tuple(sorted((k, v) for k, v in env.items() if k not in LATE_ENV)))


@dataclass
class Run:
    result: CmdResult
    log: str  # the profiler's log file ("" without one)
    prestarted: bool  # the job ran in a process started before the call
    handed_at: float = 0.0  # time.monotonic() when the job was handed over, and when its process had ended
    ended_at: float = 0.0


class _Process:
    """One target started with ``launch``, blocked on its FIFO until ``hand`` gives it a job."""

    def __init__(self, launch: Launch):
        self.launch, self.started = launch, time.monotonic()
        self.dir = Path(tempfile.mkdtemp(prefix="kernels_env_prestart_"))
        self.fifo, self.ack, self.log = self.dir / "job", self.dir / "ack", self.dir / "profiler.csv"
        os.mkfifo(self.fifo, 0o600)
        # Read-write: never blocks, and keeps the FIFO's data until the target reads it; when this process
        # dies the target sees EOF and exits.
        self._fd = os.open(self.fifo, os.O_RDWR)
        self._out, self._err = (open(self.dir / n, "w+b") for n in ("stdout", "stderr"))  # noqa: SIM115
        wrapper = [self.log.as_posix() if a == LOG_FILE else a for a in launch.wrapper]
        target = [sys.executable, "-m", _MODULE, "--job", str(self.fifo), "--ack", str(self.ack)]
        try:
            self.proc = subprocess.Popen(
                wrapper + target,
                env=dict(launch.env),
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=self._err,
                start_new_session=True,  # its own group: killed as one on timeout, a session hygiene knows
            )
        except OSError:  # e.g. the profiler's binary is gone: nothing started, nothing left behind
            self._release()
            raise
        OWN_SESSIONS.add(self.proc.pid)
        self.job_id = ""

    def alive(self) -> bool:
        return (
            self.proc.returncode is None
            and os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        )  # WNOWAIT: do not reap here, the leader's id (its session's) stays ours until ``kill``

    def hand(self, argv: list[str], env: dict[str, str]) -> None:
        self.job_id = uuid.uuid4().hex
        late = {k: env.get(k) for k in LATE_ENV}
        os.write(self._fd, (json.dumps({"id": self.job_id, "argv": argv, "env": late}) + "\n").encode())

    def acknowledged(self) -> bool:
        """The target took this job (not a line someone else wrote to its FIFO)."""
        try:
            return self.ack.read_text().strip() == self.job_id
        except OSError:
            return False

    def wait(self, timeout_s: float) -> CmdResult:
        t0 = time.monotonic()
        timed_out = False
        try:
            self.proc.wait(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            self._terminate()
        rc = None if timed_out else self.proc.returncode
        out, err = _tail(self._out, _MAX_BYTES), _tail(self._err, _MAX_BYTES)
        return CmdResult(rc, out, err, timed_out, time.monotonic() - t0)

    def _terminate(self) -> None:
        if self.proc.returncode is None:
            try:
                tree = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.Error:
                tree = []
            kill_tree(self.proc.pid)  # ncu, the target and anything the candidate started, whatever session
            self.proc.wait()
            _wait_dead(tree, 5.0)  # gone when this returns, not merely signalled

    def kill(self) -> None:
        self._terminate()
        self.close()

    def close(self) -> None:
        OWN_SESSIONS.discard(self.proc.pid)
        self._release()

    def _release(self) -> None:
        for f in (self._out, self._err):
            f.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        shutil.rmtree(self.dir, ignore_errors=True)


def _wait_dead(procs: list[psutil.Process], timeout_s: float) -> None:
    """Until each is gone or a zombie (its new parent reaps it, or, with an init that never reaps, nobody)."""
    deadline = time.monotonic() + timeout_s
    for p in procs:
        while time.monotonic() < deadline:
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            time.sleep(0.01)


class Prestarter:
    """At most one waiting process (a run worker serves one request at a time)."""

    def __init__(self) -> None:
        self.ready: _Process | None = None

    def run(self, launch: Launch, argv: list[str], env: dict[str, str], timeout_s: float) -> Run:
        """Run the target job ``argv`` (``_target``'s arguments) under ``launch``, then pre-start the next."""
        t0 = time.monotonic()
        proc, self.ready = self.ready, None
        if proc is not None and not (proc.launch == launch and proc.alive()):
            proc.kill()  # stale (another launch) or dead
            proc = None
        try:
            run = self._job(proc, launch, argv, env, timeout_s)
            if run is None:  # the pre-started process never took the job: a fresh one, with the time left
                run = self._job(None, launch, argv, env, timeout_s - (time.monotonic() - t0))
            return run
        finally:
            try:
                self.ready = _Process(launch)
            except OSError:  # cannot start one now (the call itself said why): the next call starts fresh
                self.ready = None

    def _job(self, proc, launch, argv, env, timeout_s) -> Run | None:
        prestarted = proc is not None
        proc = proc or _Process(launch)
        try:
            handed_at = time.monotonic()
            proc.hand(argv, env)
            result = proc.wait(timeout_s)
            ended_at = time.monotonic()
            if prestarted and not result.timed_out and not proc.acknowledged():
                return None
            log = proc.log.read_text(errors="replace") if proc.log.exists() else ""
            return Run(result, log, prestarted, handed_at, ended_at)
        finally:
            proc.kill()

    def close(self) -> None:
        proc, self.ready = self.ready, None
        if proc is not None:
            proc.kill()


PRESTARTER = Prestarter()  # this process's (a run worker's); ``close`` at shutdown
