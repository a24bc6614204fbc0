"""The compile stage: import a solution with the GPU hidden so every kernel build happens (and is cached)
on CPU workers, never on the GPU worker.

A compile worker imports torch once, then forks one short-lived child per request (``serve``): the child
materialises the sources, installs the build hooks (``kernels_env.build``), imports the reference and the
solution with ``KERNELS_ENV_BUILD_ONLY=1``, checks ``ModelNew`` and its constructor, and reports. The parent
enforces the compile timeout by killing the child's whole process group (nvcc, ninja, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import build, loader
from .diagnostics import truncate
from .loader import LoadError, ProblemError
from .protocol import CompileRequest
from .result import COMPILE_ERROR, TIMEOUT, message


def compile_in_child(req: CompileRequest) -> dict[str, Any]:
    os.environ.update(req.env)
    build.install_build_hooks(True, os.environ.get(build.SANDBOX_CACHE_ENV, req.workdir))
    workdir = Path(req.workdir)
    try:
        ref_path = loader.materialize(req.reference, workdir / "reference")
        problem = loader.load_problem(ref_path, req.reference.name)
        init_inputs = list(problem.get_init_inputs())
    except ProblemError as exc:
        return {"problem_error": str(exc)}
    except Exception as exc:
        return {"problem_error": f"reference get_init_inputs() failed: {type(exc).__name__}: {exc}"}
    sol = req.solution
    workspace = sol.name if sol.files is not None else None
    display = f"{sol.name}/{sol.entry}" if workspace else Path(sol.name).name
    texts = (
        [sol.text] if sol.text is not None else [t for p, t in (sol.files or {}).items() if p.endswith(".py")]
    )
    files = list(sol.files or {})
    try:
        path = loader.materialize(sol, workdir / "solution")
        _, model_new = loader.load_solution(path, display, workspace)
        loader.check_call(model_new, init_inputs, "ModelNew", COMPILE_ERROR)
    except LoadError as exc:
        return {
            "status": exc.status,
            "error": exc.error,
            "messages": exc.messages,
            "backends": build.detect_backends(texts, build.BUILDS),
        }
    return {
        "status": "ok",
        "backends": build.detect_backends(texts, build.BUILDS),
        "needs_cuda": build.needs_cuda(texts, build.BUILDS, files),
        "builds": build.BUILDS,
    }


def serve(req: CompileRequest) -> dict[str, Any]:
    """Fork a child for ``req`` and wait for its report, at most ``req.timeout_s`` seconds."""
    workdir = Path(req.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    def failed(exc: BaseException) -> dict[str, Any]:
        return {
            "status": COMPILE_ERROR,
            "error": f"compile stage failed: {type(exc).__name__}: {exc}",
            "messages": [message("traceback", truncate(traceback.format_exc()))],
        }

    run = run_forked(lambda: compile_in_child(req), failed, req.timeout_s, workdir / "compile.log")
    if run.timed_out:
        return {
            "status": TIMEOUT,
            "error": f"compile stage exceeded {req.timeout_s:g} s (killed)",
            "messages": [message("log", run.log_tail)] if run.log_tail else [],
            "duration_s": run.duration_s,
        }
    report = run.report
    if report is None:
        report = {
            "status": COMPILE_ERROR,
            "error": f"importing the solution crashed the process ({run.exit})",
            "messages": [message("log", run.log_tail)] if run.log_tail else [],
        }
    elif run.log_tail and report.get("status") not in (None, "ok"):
        report.setdefault("messages", []).append(message("log", run.log_tail))
    report["duration_s"] = run.duration_s
    return report


@dataclass
class Forked:
    """How a forked child ended: its report (None if it died without one), a timeout, its exit."""

    report: dict[str, Any] | None
    timed_out: bool
    exit: str  # "exit code N" or "signal SIGSEGV"
    log_tail: str  # the end of what the child printed (stdout and stderr)
    duration_s: float


def run_forked(
    fn: Callable[[], dict[str, Any]],
    on_error: Callable[[BaseException], dict[str, Any]],
    timeout_s: float,
    log_path: Path,
) -> Forked:
    """Run ``fn`` in a forked child in its own session (stdout/stderr to ``log_path``), its JSON report sent
    through a pipe; after ``timeout_s`` seconds kill the child's whole process group (nvcc, ninja, ...).
    An exception in ``fn`` becomes ``on_error(exc)``. Call from a single-threaded worker's main thread."""
    read_fd, write_fd = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: never returns
        code = 0
        try:
            os.close(read_fd)
            os.setsid()
            _die_with_parent()
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            report = fn()
        except BaseException as exc:  # the child must always report and exit
            report = on_error(exc)
            code = 1
        try:
            data = json.dumps(report, default=str).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = started + timeout_s
    timed_out = False
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    _kill_group(
        pid
    )  # on timeout, and leftovers the child started in the background (the zombie holds the id)
    _, status = os.waitpid(pid, 0)
    try:
        report = json.loads(b"".join(chunks)) if chunks and not timed_out else None
    except ValueError:
        report = None
    code = os.waitstatus_to_exitcode(status)
    exit_text = f"signal {_signal_name(-code)}" if code < 0 else f"exit code {code}"
    return Forked(report, timed_out, exit_text, _tail(log_path), round(time.perf_counter() - started, 3))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _die_with_parent() -> None:
    """The forked child (single-threaded, forked by the compile worker's main thread) dies with it."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_group(pid: int) -> None:
    from .processes import kill_tree

    kill_tree(pid)


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
