"""Worker process main loop: ``python -m kernels_env.runtime.worker --role run|compile --device cpu|cuda``.

Speaks the JSON-lines protocol (``kernels_env.rules.messages``) on its original stdin/stdout, which it moves
to
high, close-on-exec file descriptors before any candidate code runs: fd 0 becomes /dev/null and fd 1 the log
(stderr), so whatever a candidate reads or prints never touches the protocol. Progress messages and the reply
of a request echo the request's nonce and count a sequence number (the supervisor rejects anything else).
A run worker handles evaluate, baseline and GPU tool requests on one device; a compile worker forks a child
per compile request (``kernels_env.judge.build.compile_stage``) and per CPU tool request
(``kernels_env.tools._serve``).
A request that leaves the device unusable (sticky CUDA error) is answered with ``fatal: true`` and the worker
exits so its supervisor starts a fresh one.
With a GPU lock (several run workers on one GPU, ``judge.timing.gpu_share``) each request's GPU work
runs under it, its health check included; its waits for the lock are announced as progress
(``gpu_waiting``), so the supervisor does not count them against the request's limit, and reported in the
reply (``gpu_lock_s``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

from ..host.environment import environment
from ..host.processes import kill_tree
from ..rules import messages
from ..tools._prestart import PRESTARTER


def _protocol_channel() -> tuple[BinaryIO, BinaryIO]:
    """(requests, replies): the original fds 0/1 moved out of the candidate's way (see the module doc)."""
    import fcntl
    import secrets

    base = 256 + secrets.randbelow(512)  # not the next free number a candidate would try first
    fds = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base) for fd in (0, 1)]
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    messages.CHANNEL_FDS.update(fds)
    return os.fdopen(fds[0], "rb"), os.fdopen(fds[1], "wb")  # buffered: send() flushes


class _Channel:
    """Writes protocol messages; stamps progress and replies with the current request's nonce and sequence."""

    def __init__(self, out: BinaryIO, protocol: Any):
        self._out, self._protocol = out, protocol
        self._nonce, self._seq = "", 0

    def begin(self, request: Any) -> None:
        self._nonce, self._seq = getattr(request, "nonce", ""), 0

    def send(self, message: Any) -> None:
        if isinstance(message, (self._protocol.Progress, self._protocol.Reply)):
            message.nonce, message.seq = self._nonce, self._seq
            self._seq += 1
        self._out.write(self._protocol.encode(message))
        self._out.flush()


def _exit_with_parent() -> None:
    """Workers never outlive their client, even one killed with SIGKILL while a candidate is running."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                with contextlib.suppress(Exception):
                    kill_tree(os.getpid())  # also what tools started in their own sessions
                with contextlib.suppress(Exception):
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("run", "compile"), required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args(argv)
    _exit_with_parent()
    requests, out = _protocol_channel()
    channel = _Channel(out, messages)
    if args.role == "compile":
        return _serve_compile(channel, requests, messages)
    try:
        return _serve_run(channel, requests, messages, args.device)
    finally:  # the waiting profiling process: now, not once it finishes importing and sees its FIFO closed
        PRESTARTER.close()


def _serve_compile(channel: _Channel, requests: BinaryIO, messages) -> int:
    import torch  # noqa: F401 - imported once here so every forked child starts warm
    import torch.utils.cpp_extension  # noqa: F401

    for optional in ("triton", "numpy", "kernels_env.fastpath", "kernels_env.guard"):
        with contextlib.suppress(Exception):  # optional: a missing package only costs the child an import
            __import__(optional)
    # The compile stage imports the guard, and so torch: only a compile worker, after the imports above.
    from ..judge.build.compile_stage import serve
    from ..tools._serve import serve_forked

    channel.send(messages.Hello(role="compile", pid=os.getpid()))
    for line in requests:
        msg = messages.decode(line)
        if isinstance(msg, messages.Shutdown):
            return 0
        channel.begin(msg)
        payload = serve_forked(msg) if isinstance(msg, messages.ToolRequest) else serve(msg)
        channel.send(messages.Reply(id=msg.id, payload=payload))
    return 0


def _serve_run(channel: _Channel, requests: BinaryIO, messages, device_name: str) -> int:
    if device_name == "cpu":  # before anything imports triton (torch._dynamo does): interpreted kernels
        os.environ.setdefault("TRITON_INTERPRET", "1")
    # Inductor (the torch.compile baselines) compiles in this process: its default pool of one compile
    # subprocess per core would outlive the request that first compiled and be judged as the candidate's
    # processes (seen on the H200: a Triton candidate rejected for 32 leftover processes).
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch

    for optional in ("triton", "triton.language", "numpy"):  # most candidates import these: pay once, here
        with contextlib.suppress(Exception):
            __import__(optional)
    # The judge imports torch and Triton: only now, with the environment set (TRITON_INTERPRET above).
    from ..judge.run import enforce, harness, hygiene
    from ..judge.run.phases import PhaseClock
    from ..judge.timing import gpu_share

    if device_name == "cuda":
        torch.cuda.init()
        torch.cuda.set_device(0)
    device = torch.device(device_name, 0) if device_name == "cuda" else torch.device("cpu")
    env = environment(device_name)
    state = hygiene.GlobalState()
    hygiene.GLOBAL_STATE = state
    current: dict[str, str] = {}  # the request being served (its id), for the lock's wait announcements

    def on_wait(waiting: bool) -> None:
        if current.get("id"):  # at start-up nobody waits on this worker's requests
            channel.send(messages.Progress(id=current["id"], stage="", gpu_waiting=waiting))

    gpu_share.install(device, on_wait)  # before start_worker: its bandwidth probe takes the lock
    enforce.start_worker(device)  # last: judge code and torch state as they are before any candidate runs
    gc.collect()
    gc.freeze()  # the harness's own objects: later collections (after every request) skip them
    channel.send(messages.Hello(role="run", pid=os.getpid(), environment=env))

    phases = PhaseClock()

    def progress_for(request_id: str):
        def progress(stage: str, detail: str) -> None:
            phases.enter(detail or stage)
            channel.send(messages.Progress(id=request_id, stage=stage, detail=detail))

        return progress

    def report_for(request_id: str):
        """Fields of a progress message that changes no stage (the host-memory limit's, check.memory)."""

        def report(**fields: Any) -> None:
            channel.send(messages.Progress(id=request_id, stage="", **fields))

        return report

    def handle(msg: Any) -> dict[str, Any]:
        """The request's payload; whatever happens, its workdir and this process are cleaned up after it."""
        profiler = _request_profiler()
        try:
            if isinstance(msg, messages.EvaluateRequest):
                return harness.evaluate(msg, device, progress_for(msg.id), report_for(msg.id))
            if isinstance(msg, messages.BaselineRequest):
                return harness.baselines(msg, device, env, progress_for(msg.id), report_for(msg.id))
            if isinstance(msg, messages.ToolRequest):
                from ..tools._serve import serve_in_process  # the guard, so torch: as the judge above

                return serve_in_process(msg, progress_for(msg.id))
            return {"harness_error": f"a run worker does not handle {msg.kind} messages"}
        except Exception:
            return {"harness_error": traceback.format_exc()[-4000:]}
        finally:
            if profiler is not None:
                profiler.disable()
                with contextlib.suppress(OSError):  # a developer aid: never what fails a request
                    profiler.dump_stats(os.path.join(os.environ[PROFILE_DIR], f"{msg.kind}-{msg.id}.prof"))
            phases.enter("cleanup")
            hygiene.cleanup(getattr(msg, "workdir", ""), device, state)

    for line in requests:
        msg = messages.decode(line)
        if isinstance(msg, messages.Shutdown):
            return 0
        channel.begin(msg)
        current["id"] = getattr(msg, "id", "")
        started = time.perf_counter()
        phases.start("load")
        payload: dict[str, Any] = {}
        broken: str | None = None
        lock_times = gpu_share.LockTimes()
        # Profilers and sanitizers run the candidate in processes of their own: the GPU to itself throughout.
        alone = isinstance(msg, messages.ToolRequest) and msg.tool in EXCLUSIVE_TOOLS
        try:
            with gpu_share.request(device, exclusive=alone) as lock_times:
                payload = handle(msg)
                broken = hygiene.health_check(device)  # GPU work too: under the lock
        except Exception:  # the lock itself failed (its descriptors gone): reported, never a dead loop
            payload = payload or {"harness_error": traceback.format_exc()[-4000:]}
        current["id"] = ""
        payload["phases_s"] = phases.stop()
        payload["duration_s"] = round(time.perf_counter() - started, 3)
        if gpu_share.active():
            payload["gpu_lock_s"] = lock_times.to_dict()
            if gpu_share.lost():  # candidate code closed or replaced the lock's descriptors: never reuse
                payload["worker_tainted"] = True
        if broken:
            payload["device_error"] = broken
        tainted = payload.get("worker_tainted")  # a candidate tampered with this process: never reuse it
        channel.send(messages.Reply(id=msg.id, payload=payload, fatal=bool(broken or tainted)))
        if broken or tainted:
            return 3
    return 0


EXCLUSIVE_TOOLS = frozenset({"profile", "sanitize"})  # hold the GPU lock exclusive for the whole request
PROFILE_DIR = "KERNELS_ENV_PROFILE_DIR"  # developers: a cProfile dump of each run-worker request goes here


def _request_profiler():
    if not os.environ.get(PROFILE_DIR):
        return None
    import cProfile

    try:
        os.makedirs(os.environ[PROFILE_DIR], exist_ok=True)
    except OSError as exc:
        print(f"kernels_env worker: {PROFILE_DIR} unusable, not profiling: {exc}", file=sys.stderr)
        return None
    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (torch/Triton atexit work): nothing here needs cleaning
