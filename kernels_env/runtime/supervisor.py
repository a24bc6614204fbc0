"""Worker processes seen from the caller: start, talk JSON lines with deadlines, watch memory, kill, restart.

A ``Worker`` is one child process (``python -m kernels_env.runtime.worker``) in its own session, its stderr
going to
a log file. ``call`` sends one request and waits for its reply; a timeout, a crash (EOF), host memory (RSS of
the worker and its children) above the limit, or a malformed reply kills the process group and raises
``WorkerFailure`` with what is known (last progress stage, exit signal, stderr tail). ``pool.WorkerPool``
hands out workers one request at a time and restarts dead ones in the background.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from ..host.processes import kill_tree
from ..rules import messages
from .errors import SandboxError, WorkerFailure

POLL_S = 0.05
MAX_LOG_BYTES = 8 * 2**20  # a worker's log is started afresh beyond this (at its next start)
MAX_OUTPUT_BYTES = 64 * 2**20  # output one request may print before its worker is killed


class Worker:
    def __init__(
        self,
        role: str,
        device: str,
        env: dict[str, str],
        log_dir: Path,
        name: str,
        memory_limit_bytes: int,
        startup_timeout_s: float,
    ):
        self.role, self.device, self.env, self.name = role, device, env, name
        self.log_path = log_dir / f"{name}.log"
        self.memory_limit_bytes = memory_limit_bytes
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen | None = None
        self.hello: messages.Hello | None = None
        self.requests = 0
        self._buffer = b""
        self.last_progress: tuple[float, str, str] | None = None  # (monotonic s, stage, detail): diagnostics
        self.tmpdir: str | None = None  # this process's TMPDIR, removed with it
        self.stopped = False  # asked to exit by its pool's close(), not by a candidate's failure

    def start(self) -> messages.Hello:
        self.kill()
        self.stopped = False
        if self.log_path.exists() and self.log_path.stat().st_size > MAX_LOG_BYTES:
            self.log_path.unlink()
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        # A private TMPDIR per process, removed when it is killed: what a killed worker's tools had open
        # (gcc's cc*.s of a Triton launcher build, Python TemporaryDirectory) was left in /tmp otherwise
        # (H200 soak, 2026-12-01). torch.compile's cache stays where it was: shared and persistent.
        parent_tmp = tempfile.gettempdir()
        user = getpass.getuser().replace("\\", "_")  # torch's own default name for it
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(parent_tmp, f"torchinductor_{user}"))
        self.tmpdir = tempfile.mkdtemp(prefix=f"kernels_env-{self.name}-", dir=parent_tmp)
        env.update(TMPDIR=self.tmpdir, TMP=self.tmpdir, TEMP=self.tmpdir)
        worker = "kernels_env.runtime.worker"
        cmd = [sys.executable, "-m", worker, "--role", self.role, "--device", self.device]
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
                cwd=root,
            )
        finally:
            log.close()
        self._buffer = b""
        self.requests = 0
        try:
            hello = self._read(time.monotonic() + self.startup_timeout_s, request_id=None)
        except WorkerFailure as exc:
            self.kill()
            raise SandboxError(f"{self.name} worker did not start: {exc.detail}\n{exc.log_tail}") from None
        if not isinstance(hello, messages.Hello):
            self.kill()
            raise SandboxError(f"{self.name} worker sent {hello!r} instead of hello")
        self.hello = hello
        return hello

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        kill_tree(proc.pid)  # its group and what its tools started in their own sessions (nvcc, ncu)
        with contextlib.suppress(Exception):
            proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(Exception):
                stream.close()
        self._remove_tmpdir()

    def _remove_tmpdir(self) -> None:
        tmp, self.tmpdir = self.tmpdir, None
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    def request_shutdown(self) -> None:
        self.stopped = True
        if self.alive:
            with contextlib.suppress(Exception):
                self.proc.stdin.write(messages.encode(messages.Shutdown()))
                self.proc.stdin.flush()

    def close(self, grace_s: float = 10.0) -> None:
        """Ask the worker to exit, give it ``grace_s`` seconds, then kill its process group."""
        self.request_shutdown()
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=grace_s)
        self.kill()

    def call(self, request: Any, timeout_s: float) -> messages.Reply:
        if not self.alive:
            raise WorkerFailure("crash", f"{self.name} worker is not running")
        self.requests += 1
        self._log_offset = self._log_size()
        request.nonce = secrets.token_hex(16)  # fresh per request: a reply must echo it
        try:
            self.proc.stdin.write(messages.encode(request))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.kill()
            raise WorkerFailure(
                "crash", f"{self.name} worker pipe closed: {exc}", log_tail=self.log_tail()
            ) from None
        deadline = time.monotonic() + timeout_s
        reply = self._read(deadline, request_id=request.id, timeout_s=timeout_s, nonce=request.nonce)
        if reply.fatal:  # the worker exits after this reply
            self.kill()
        elif self._buffer.strip() or (self._pending() or b"").strip():  # exactly one reply per request
            self._forgery(f"data after the reply to {request.id!r}", self._buffer[:300], "")
        return reply

    def _pending(self) -> bytes | None:
        """What the worker wrote that nobody read yet (b'' at end of file; None when nothing is there)."""
        if self.proc is None:
            return None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            if not sel.select(timeout=0):
                return None
        chunk = os.read(fd, 1 << 16)
        self._buffer += chunk
        return chunk

    def stray_output(self) -> bool:
        """The idle worker wrote something (a candidate's leftover writer) or exited: do not hand it out."""
        return self.alive and (self._buffer.strip() != b"" or self._pending() is not None)

    def _forgery(self, what: str, data: bytes | str, stage: str) -> None:
        self.kill()
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)
        raise WorkerFailure(
            "forgery",
            f"forged message on the protocol channel: {what}",
            stage,
            self.log_tail(),
            {"what": what, "data": text[:300]},
        )

    def _read(self, deadline: float, request_id: str | None, timeout_s: float = 0.0, nonce: str = "") -> Any:
        """The next non-progress message; progress updates the stage a failure reports. During a request
        (``nonce`` given) every message must be authentic: a malformed line, a wrong nonce or sequence number
        is a forgery (only candidate code, never the worker, writes such lines)."""
        stage = ""
        seq = 0
        # The host-memory limit of this request (judge.check.memory): the worker's own plus what the
        # judge and the reference may hold (``host_bytes``, at most the machine's memory); whose code runs.
        memory = {"owner": "", "host_bytes": 0, "memory_plan": None}
        gpu_wait = GpuWaitCredit(timeout_s)
        proc = self.proc
        if proc is None:
            raise self._gone(stage)
        # Our own descriptor of the pipe: a kill from another thread closes proc.stdout, and this read then
        # sees EOF instead of a closed (or reused) descriptor number. Only taking it can race that close.
        try:
            fd = os.dup(proc.stdout.fileno())
        except (OSError, ValueError):  # ValueError: proc.stdout closed already
            if self.proc is None:
                raise self._gone(stage) from None
            raise
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        next_memory_check = 0.0
        try:
            while True:
                while b"\n" in self._buffer:
                    line, self._buffer = self._buffer.split(b"\n", 1)
                    try:
                        msg = messages.decode(line)
                    except messages.ProtocolError as exc:
                        if nonce:
                            self._forgery(f"a malformed line ({exc})", line, stage)
                        self.kill()
                        raise WorkerFailure(
                            "protocol", f"malformed message from worker: {exc}", stage, self.log_tail()
                        ) from None
                    if nonce:
                        if not isinstance(msg, (messages.Progress, messages.Reply)):
                            self._forgery(f"an unexpected {msg.kind} message", line, stage)
                        if not secrets.compare_digest(str(msg.nonce), nonce) or msg.seq != seq:
                            self._forgery(f"a {msg.kind} without the request's nonce/sequence", line, stage)
                        seq += 1
                    if isinstance(msg, messages.Progress):
                        stage = msg.stage or stage
                        _memory_fields(memory, msg)
                        gpu_wait.update(msg.gpu_waiting, time.monotonic())
                        if msg.stage:
                            self.last_progress = (time.monotonic(), msg.stage, msg.detail)
                        continue
                    if request_id is not None and getattr(msg, "id", None) != request_id:
                        self.kill()
                        raise WorkerFailure(
                            "protocol",
                            f"reply for {getattr(msg, 'id', None)!r}, expected {request_id!r}",
                            stage,
                            self.log_tail(),
                        )
                    return msg
                if self.proc is None:  # killed by another thread: its closed pipe never becomes readable
                    raise self._gone(stage)
                now = time.monotonic()
                extended = deadline + gpu_wait.extension(now)
                if now >= extended:
                    self.kill()
                    what = f"exceeded the {timeout_s:g} s limit" if timeout_s else "timed out"
                    if gpu_wait.extension(now) > 0:
                        what += f" (not counting {gpu_wait.extension(now):.1f} s waiting for the GPU lock)"
                    raise WorkerFailure("timeout", what, stage, self.log_tail())
                if now >= next_memory_check:
                    next_memory_check = now + 2 * POLL_S
                    if self._log_size() - getattr(self, "_log_offset", 0) > MAX_OUTPUT_BYTES:
                        self.kill()
                        raise WorkerFailure(
                            "output",
                            f"the candidate printed more than {MAX_OUTPUT_BYTES >> 20} MiB",
                            stage,
                            self.log_tail(),
                        )
                    rss = self._rss()
                    limit = self.memory_limit_bytes + memory["host_bytes"]
                    if rss > limit and (b"\n" in self._buffer or self._pending()):
                        next_memory_check = 0.0  # first what the worker already said (whose code runs)
                    elif rss > limit:
                        self.kill()
                        raise WorkerFailure(
                            "memory", _memory_text(rss, limit, memory), stage, self.log_tail(), dict(memory)
                        )
                if sel.select(timeout=min(POLL_S, max(extended - now, 0.0))):
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        current = self.proc
                        if current is None or self.stopped:  # another thread killed or closed it
                            self.kill()
                            raise self._gone(stage)
                        code = current.wait(timeout=30)
                        self.kill()
                        raise WorkerFailure("crash", _exit_text(code), stage, self.log_tail())
                    self._buffer += chunk
                    if len(self._buffer) > messages.MAX_MESSAGE_BYTES:
                        self.kill()
                        raise WorkerFailure("protocol", "worker message exceeds the size limit", stage)
        finally:
            sel.close()
            os.close(fd)

    def _gone(self, stage: str) -> Exception:
        """What a request gets whose worker another thread killed: the sandbox closing is no verdict on the
        candidate (a closed pipe would otherwise be waited on until the request's deadline)."""
        if self.stopped:
            return SandboxError(f"the sandbox closed while {self.name} worker ran this request")
        return WorkerFailure("crash", f"{self.name} worker was killed", stage, self.log_tail())

    def _rss(self) -> int:
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except (psutil.Error, AttributeError):
            return 0
        total = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
        return total

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_tail(self, limit: int = 3000) -> str:
        """What the worker wrote to stderr during the current request (its last ``limit`` bytes)."""
        start = getattr(self, "_log_offset", 0)
        try:
            with open(self.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(start, size - limit))
                return f.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""


class GpuWaitCredit:
    """A request's waits for its GPU's lock (progress ``gpu_waiting``, judge.timing.gpu_share) move its
    deadline: a worker queued behind a neighbour whose candidate hangs holding the GPU is not timed out for
    the neighbour's hang. At most ``limit_s`` (the request's own limit) in all, so a request ends in at most
    twice its limit whatever its worker claims."""

    def __init__(self, limit_s: float):
        self.left = max(0.0, limit_s)
        self.granted = 0.0
        self.since: float | None = None

    def update(self, waiting: Any, now: float) -> None:
        if waiting is True and self.since is None:
            self.since = now
        elif waiting is False and self.since is not None:
            used = min(now - self.since, self.left)
            self.left -= used
            self.granted += used
            self.since = None

    def extension(self, now: float) -> float:
        """Seconds the deadline moves now: the finished waits and the one in progress."""
        pending = min(now - self.since, self.left) if self.since is not None else 0.0
        return self.granted + pending


def _memory_fields(memory: dict[str, Any], msg: messages.Progress) -> None:
    if msg.owner in ("judge", "candidate"):
        memory["owner"] = msg.owner
    if isinstance(msg.host_bytes, int) and msg.host_bytes >= 0:
        memory["host_bytes"] = min(msg.host_bytes, psutil.virtual_memory().total)
    if isinstance(msg.memory_plan, dict):
        memory["memory_plan"] = msg.memory_plan


def _memory_text(rss: int, limit: int, memory: dict[str, Any]) -> str:
    text = f"host memory {rss / 2**30:.2f} GiB exceeded the limit of {limit / 2**30:.2f} GiB"
    if memory["host_bytes"]:
        allowed = memory["host_bytes"]
        size = f"{allowed / 2**30:.2f} GiB" if allowed >= 2**30 else f"{allowed / 2**20:.1f} MiB"
        text += f" ({size} of it for the judge and the reference)"
    if memory["owner"] == "judge":
        text += " while the judge's code ran"
    return text


def _exit_text(code: int | None) -> str:
    if code is None:
        return "worker exited"
    if code < 0:
        try:
            return f"worker process died from signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker process died from signal {-code}"
    return f"worker process exited with code {code}"
