"""The compile stage: import a solution with the GPU hidden so every kernel build happens (and is cached)
on CPU workers, never on the GPU worker.

A compile worker imports torch once, then forks one short-lived child per request (``serve``): the child
materialises the sources, installs the build hooks (``kernels_env.judge.build.hooks``), imports the reference
and the
solution with ``KERNELS_ENV_BUILD_ONLY=1``, checks ``ModelNew`` and its constructor, and reports. The parent
enforces the compile timeout by killing the child's whole process group (nvcc, ninja, ...).

Candidate code runs in the child, so the child's report is not trusted blindly: the child closes the worker's
protocol descriptors first, imports the solution under the guard's ``load_guard`` (writes to the judge's files
and introspection are refused: ``rejected``), and reports in two JSON lines: the reference's status (written
before any candidate code ran) and then the solution's. A report that claims the reference broke after the
reference was fine, or any extra line, is a forgery (``protocol_forgery``); ``needs_cuda`` is recomputed here
from the sources. The judge's own failure before any candidate code ran (building the hooks, writing the
files) is a ``judge_error`` line in the reference's place; after candidate code ran the child's word cannot
be trusted (a candidate could claim a judge error to dodge its failure reward), so an exception escaping the
judge's steps there stays the candidate's ``compile_error``.

Two clocks (``import_timeout_s`` and ``timeout_s``): importing the reference and the solution may take the
import budget of the child's own time; time while the child waits for a process it started (nvcc, ninja,
the NVRTC helper: every build runs in one) counts only against the compile budget. A solution that hangs at
import gets its ``timeout`` after the import budget, one that builds for minutes is not cut short by it.
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

from ...guard import load_guard
from ...guard._frames import PACKAGE_DIR
from ...host.processes import kill_tree
from ...rules import messages
from ...rules.messages import CompileRequest
from ...rules.result import COMPILE_ERROR, REJECTED, TIMEOUT, message
from . import backends, cache, hooks, loader, toolchains
from .diagnostics import exception_line, truncate
from .errors import LoadError, ProblemError

Emit = Callable[[dict[str, Any]], None]


def _texts(req: CompileRequest) -> tuple[list[str], list[str]]:
    sol = req.solution
    texts = (
        [sol.text] if sol.text is not None else [t for p, t in (sol.files or {}).items() if p.endswith(".py")]
    )
    return texts, list(sol.files or {})


def compile_in_child(req: CompileRequest, report_reference: Emit = lambda report: None) -> dict[str, Any]:
    """Import reference and solution; ``report_reference`` receives the reference's status before any
    candidate code runs."""
    os.environ.update(req.env)
    workdir = Path(req.workdir)
    try:
        hooks.install_build_hooks(True, os.environ.get(cache.SANDBOX_CACHE_ENV, req.workdir))
        ref_path = loader.materialize(req.reference, workdir / "reference")
        sol_path: Path | LoadError = _materialize_solution(req.solution, workdir / "solution")
    except Exception as exc:  # noqa: BLE001 - no candidate code ran yet: this is the judge's failure
        return judge_error_report(exc)
    try:
        problem = loader.load_problem(ref_path, req.reference.name)
        init_inputs = list(problem.get_init_inputs())
    except ProblemError as exc:
        return {"problem_error": str(exc)}
    except Exception as exc:
        return {"problem_error": f"reference get_init_inputs() failed: {type(exc).__name__}: {exc}"}
    report_reference({"reference": "ok"})
    if isinstance(sol_path, LoadError):  # the workspace itself is unusable (a path escapes, too large)
        return {"status": sol_path.status, "error": sol_path.error, "messages": sol_path.messages}
    return _import_solution(req, sol_path, ref_path, init_inputs)


def _materialize_solution(source, directory: Path) -> Path | LoadError:
    try:
        return loader.materialize(source, directory)
    except LoadError as exc:
        return exc


def judge_error_report(exc: BaseException) -> dict[str, Any]:
    """The child's report of the judge's own failure (trusted only before any candidate code ran)."""
    return {"judge_error": exception_line(exc), "traceback": truncate(traceback.format_exc())}


def _import_solution(req: CompileRequest, path: Path, ref_path: Path, init_inputs: list) -> dict[str, Any]:
    sol = req.solution
    workspace = sol.name if sol.files is not None else None
    display = f"{sol.name}/{sol.entry}" if workspace else Path(sol.name).name
    texts, files = _texts(req)
    try:
        with load_guard(
            candidate_paths=[str(path.parent)], reference_paths=[str(ref_path)], protected_paths=[PACKAGE_DIR]
        ) as found:
            try:
                _, model_new = loader.load_solution(path, display, workspace)
            except LoadError as exc:
                failed = exc
            else:
                failed = None
        if found:  # refused while importing: this is the verdict, whatever the import did next
            first = found[0]
            return {
                "status": REJECTED,
                "error": f"policy check {first.check!r} failed: {first.message}",
                "check": first.check,
                "evidence": {**first.evidence, "stage": "compile"},
                "backends": backends.detect_backends(texts, cache.BUILDS),
                "guard_enforced": True,
            }
        if failed is not None:
            raise failed
        loader.check_call(model_new, init_inputs, "ModelNew", COMPILE_ERROR)
    except LoadError as exc:
        return {
            "status": exc.status,
            "error": exc.error,
            "messages": exc.messages,
            "backends": backends.detect_backends(texts, cache.BUILDS),
            "guard_enforced": True,  # the import ran under the guard's load_guard
            "builds": cache.BUILDS,
        }
    return {
        "status": "ok",
        "backends": backends.detect_backends(texts, cache.BUILDS),
        "needs_cuda": backends.needs_cuda(texts, cache.BUILDS, files),
        "builds": cache.BUILDS,
    }


def toolchain_report(req: CompileRequest) -> dict[str, Any] | None:
    """``{"toolchain_missing": [...]}`` when the solution needs a toolchain this machine lacks (CuTe DSL,
    TileLang, ThunderKittens: ``kernels_env.judge.build.toolchains``), read from its sources here, in the
    worker, before any candidate code runs: a child's report can never claim it (``_parse_report``)."""
    texts, _ = _texts(req)
    sol = req.solution
    others = [t for p, t in (sol.files or {}).items() if not p.endswith(".py")]
    lacking = toolchains.missing(texts, others)
    if not lacking:
        return None
    return {"toolchain_missing": lacking, "backends": backends.detect_backends([*texts, *others], [])}


def serve(req: CompileRequest) -> dict[str, Any]:
    """Fork a child for ``req`` and wait for its report, at most ``req.timeout_s`` seconds."""
    lacking = toolchain_report(req)
    if lacking is not None:
        return {**lacking, "duration_s": 0.0}
    workdir = Path(req.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    candidate_ran = [False]  # set in the forked child, read there by ``failed``

    def child(emit: Emit) -> dict[str, Any]:
        def reference_done(line: dict[str, Any]) -> None:
            emit(line)
            candidate_ran[0] = True  # candidate code runs after this line

        return compile_in_child(req, reference_done)

    def failed(exc: BaseException) -> dict[str, Any]:
        if not candidate_ran[0]:
            return judge_error_report(exc)
        return {  # the child's word after candidate code ran: the candidate's (see the module doc)
            "status": COMPILE_ERROR,
            "error": f"compile stage failed after the solution's import: {type(exc).__name__}: {exc}",
            "messages": [message("traceback", truncate(traceback.format_exc()))],
        }

    run = run_forked(
        child,
        failed,
        req.timeout_s,
        workdir / "compile.log",
        parse=lambda data: _parse_report(data, req),
        import_timeout_s=req.import_timeout_s,
    )
    if run.timed_out:
        return _timeout_report(run, req)
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


def _timeout_report(run: Forked, req: CompileRequest) -> dict[str, Any]:
    """A killed child: the reference's fault when it never got past the reference, else the candidate's."""
    logs = [message("log", run.log_tail)] if run.log_tail else []
    if not run.output.strip():  # no "reference ok" line: no candidate code ran, the reference hung
        limit = f"{req.timeout_s:g} s"
        if run.limit == IMPORT:
            limit = f"the {req.import_timeout_s:g} s import limit"
        return {"problem_error": f"reference import exceeded {limit} (killed)", "duration_s": run.duration_s}
    if run.limit == IMPORT:
        error = (
            f"import stage: importing the solution exceeded the {req.import_timeout_s:g} s import limit "
            "(time in builds excluded; killed)"
        )
    else:
        error = f"compile stage exceeded {req.timeout_s:g} s (killed)"
    return {"status": TIMEOUT, "error": error, "messages": logs, "duration_s": run.duration_s}


IMPORT, TOTAL = "import", "total"


@dataclass
class Forked:
    """How a forked child ended: its report (None if it died without one), a timeout, its exit."""

    report: dict[str, Any] | None
    timed_out: bool
    exit: str  # "exit code N" or "signal SIGSEGV"
    log_tail: str  # the end of what the child printed (stdout and stderr)
    duration_s: float
    limit: str = ""  # which limit killed it: TOTAL (timeout_s) or IMPORT (import_timeout_s)
    output: bytes = b""  # what the child sent through the pipe (also when it was killed)


def run_forked(
    fn: Callable[[Emit], dict[str, Any]],
    on_error: Callable[[BaseException], dict[str, Any]],
    timeout_s: float,
    log_path: Path,
    parse: Callable[[bytes], dict[str, Any] | None] | None = None,
    import_timeout_s: float | None = None,
) -> Forked:
    """Run ``fn`` in a forked child in its own session (stdout/stderr to ``log_path``), its JSON report sent
    through a pipe; after ``timeout_s`` seconds kill the child's whole process group (nvcc, ninja, ...).
    An exception in ``fn`` becomes ``on_error(exc)``. ``fn`` may ``emit`` JSON lines before its report;
    the parent reads all lines with ``parse`` (default: exactly one report). The child closes the worker's
    protocol descriptors before running ``fn``: candidate code never reaches them. ``import_timeout_s``:
    also kill it once it spent that long on its own, not waiting for a process it started (``OwnTime``).
    Call from a single-threaded worker's main thread."""
    read_fd, write_fd = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: never returns
        code = 0
        try:
            os.close(read_fd)
            for fd in messages.CHANNEL_FDS:  # the worker's protocol: candidate code must not reach it
                with contextlib.suppress(OSError):
                    os.close(fd)
            os.setsid()
            _die_with_parent()
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            report = fn(lambda line: _write_line(write_fd, line))
        except BaseException as exc:  # the child must always report and exit
            report = on_error(exc)
            code = 1
        try:
            _write_line(write_fd, report)
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = started + timeout_s
    own = OwnTime(pid, import_timeout_s)
    limit = ""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            limit = TOTAL
            break
        if own.exceeded():
            limit = IMPORT
            break
        ready, _, _ = select.select([read_fd], [], [], min(remaining, own.poll_s))
        if ready:
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    timed_out = bool(limit)
    _kill_group(
        pid
    )  # on timeout, and leftovers the child started in the background (the zombie holds the id)
    _, status = os.waitpid(pid, 0)
    report = (parse or _parse_single)(b"".join(chunks)) if chunks and not timed_out else None
    code = os.waitstatus_to_exitcode(status)
    exit_text = f"signal {_signal_name(-code)}" if code < 0 else f"exit code {code}"
    duration = round(time.perf_counter() - started, 3)
    return Forked(report, timed_out, exit_text, _tail(log_path), duration, limit, b"".join(chunks))


class OwnTime:
    """The seconds a child spent on its own: sampled every ``poll_s``, a stretch counts unless the child
    had a live process of its own then (a compiler, ninja, the NVRTC helper: builds run in one)."""

    poll_s = 0.25

    def __init__(self, pid: int, limit_s: float | None):
        self.pid, self.limit_s = pid, limit_s
        self.own_s, self.last = 0.0, time.perf_counter()

    def exceeded(self) -> bool:
        if self.limit_s is None:
            return False
        now = time.perf_counter()
        if not self._building():
            self.own_s += now - self.last
        self.last = now
        return self.own_s > self.limit_s

    def _building(self) -> bool:
        import psutil

        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return False
        return any(_alive(c) for c in children)


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _write_line(fd: int, value: dict[str, Any]) -> None:
    view = memoryview(json.dumps(value, default=str).encode() + b"\n")
    while view:
        view = view[os.write(fd, view) :]


def _parse_single(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _parse_report(data: bytes, req: CompileRequest) -> dict[str, Any] | None:
    """The child's report, checked against what its first line (written before candidate code) said."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    try:
        values = [json.loads(line) for line in lines]
    except ValueError:
        values = None
    if not lines:
        return None  # the child died before reporting anything
    if values is None or not all(isinstance(v, dict) for v in values):
        return _forged("the compile report is not JSON")
    if len(values) == 1 and ("problem_error" in values[0] or "judge_error" in values[0]):
        return values[0]  # the reference (or the judge) failed before any candidate code ran
    if values[0] != {"reference": "ok"} or len(values) > 2:
        return _forged(f"the compile child wrote {len(values)} reports")
    if len(values) == 1:
        return None  # reference fine, then the child died while importing the solution
    report = values[1]
    if "problem_error" in report or "judge_error" in report:
        return _forged("a broken reference or judge reported after the reference loaded")
    if "toolchain_missing" in report:  # only the worker says so, before the child exists
        return _forged("the compile child claimed a missing toolchain")
    if report.get("status") == "ok":  # recomputed from the sources, never taken from the child
        texts, files = _texts(req)
        joined, markers = "\n".join(texts), backends.OTHER_MARKERS
        from_builds = bool(report.get("needs_cuda")) and bool(
            markers["load_inline"].search(joined) or markers["cpp_extension"].search(joined)
        )
        report["needs_cuda"] = backends.needs_cuda(texts, [], files) or from_builds
    return report


def _forged(what: str) -> dict[str, Any]:
    return {
        "status": REJECTED,
        "error": f"policy check 'protocol_forgery' failed: {what}",
        "check": "protocol_forgery",
        "evidence": {"what": what, "stage": "compile"},
        "guard_enforced": True,
    }


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
