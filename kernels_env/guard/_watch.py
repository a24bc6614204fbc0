"""Process-level tripwires while candidate code runs: an audit hook and an exception tracer.

Audit hook (PEP 578; it cannot be removed once installed): candidate code that walks frames or the garbage
collector to find the judge's tensors (catalogue #14), reads raw memory through ctypes, swaps a function's
``__code__``, installs tracers/audit hooks, writes or deletes protected files (the judge package, the
problem files: catalogue #15), spawns processes during forward, or forks itself. Only calls made directly by
candidate code count, so libraries that introspect for their own reasons (logging, torch, Triton) are not
blamed.
Opening the judge's protocol descriptors (``kernels_env.rules.messages.CHANNEL_FDS``, by number or through
``/proc/*/fd``, ``/dev/fd``) is ``protocol_forgery``; opening ``/proc/*/mem`` is ``introspection``, whoever
calls it.

Exception watcher: an exception caught by candidate code inside forward (catalogue #2: ``try: kernel()
except: fallback()``) is a failure even if forward then returns normally. Python >= 3.12 uses
``sys.monitoring`` EXCEPTION_HANDLED events (exact, and free when nothing is raised); older Pythons fall back
to ``sys.settrace`` with line events off (an exception crossing a candidate frame, while forward still returns
normally), which costs one Python call per function call while the guard is on. That cost (several times the
run time of Triton-interpreter kernels) is only paid when the candidate can catch an exception at all:
``may_catch`` finds no ``try``/``with`` in its sources and it compiled no code of its own at run time
(``COMPILED_BY_CANDIDATE``, from the audit hook) means no candidate frame has an exception handler.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import threading
from collections.abc import Iterable
from types import FrameType

from ..rules import messages
from . import _checks
from ._frames import CANDIDATE, JUDGE, REFERENCE, RUNTIME, STDLIB, TORCH, FrameClassifier, describe

_MONITORING = getattr(sys, "monitoring", None)


def describe_code(code, offset: int) -> str:
    line = None
    for start, end, lineno in code.co_lines():
        if start <= offset < end:
            line = lineno
            break
    return f"{code.co_filename}:{line} in {code.co_name}"


_INTROSPECTION_EVENTS = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._getframe",
        "sys._current_frames",
        "sys.settrace",
        "sys.setprofile",
        "sys.addaudithook",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "ctypes.cdata",
    }
)
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_PATH_EVENTS = {
    "os.remove": 0,
    "os.rename": 0,
    "os.replace": 0,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.link": 1,
    "os.symlink": 1,
    "os.rmdir": 0,
    "os.mkdir": 0,
    "os.utime": 0,
    "shutil.rmtree": 0,
    "shutil.move": 0,
    "shutil.copyfile": 1,
}
_SPAWN_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.spawn",
        "os.posix_spawn",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
    }
)
_HELPER_MODULES = ("inspect.py", "traceback.py")  # stdlib wrappers the candidate may call instead

LOAD, FORWARD = "load", "forward"
COMPILED_BY_CANDIDATE: set[str] = set()  # files whose code called compile()/exec() directly
_FD_PATH = re.compile(r"^/(?:proc/[^/]+|dev)/fd/(\d+)$")
_MEM_PATH = re.compile(r"^/proc/[^/]+/(?:task/\d+/)?mem$")

_ACTIVE: list[Watch] = []
_INSTALLED = False
_LOCAL = threading.local()


# Frequent events no check looks at (ctypes launchers of timed kernels raise one per call).
_HOT_EVENTS = frozenset({"ctypes.call_function", "ctypes.get_errno", "ctypes.set_errno", "ctypes.addressof"})


def _hook(event: str, args: tuple) -> None:
    if event in _HOT_EVENTS or not _ACTIVE or getattr(_LOCAL, "busy", False):
        return
    watch = _ACTIVE[-1]
    _LOCAL.busy = True
    before = len(watch.violations)
    try:
        watch._on_event(event, args)
    except Exception as exc:  # noqa: BLE001 - a bug here must not pass silently: record it, fail closed
        watch._record(_checks.Violation(_checks.GUARD_ERROR, f"audit hook failed on {event}: {exc!r}"))
    finally:
        _LOCAL.busy = False
    if len(watch.violations) > before:
        # Block the operation itself (the file is not written, the process not spawned, the frame not handed
        # out); the violation is already recorded, so catching this changes nothing.
        raise _checks.GuardViolation(watch.violations[before])


def install_audit_hook() -> None:
    global _INSTALLED
    if not _INSTALLED:
        sys.addaudithook(_hook)
        _INSTALLED = True


def monitoring_available() -> bool:
    return _MONITORING is not None


def may_catch(paths: Iterable[str]) -> bool:
    """Whether any Python source under ``paths`` has an exception handler (``try`` or ``with``), or compiled
    code at run time; unreadable sources count as yes (fail closed)."""
    roots = [os.path.abspath(p) for p in paths]
    if any(f == r or f.startswith(r + os.sep) for f in COMPILED_BY_CANDIDATE for r in roots):
        return True
    files = []
    for root in roots:
        if os.path.isfile(root):
            files.append(root)
        for dirpath, _, names in os.walk(root):
            files.extend(os.path.join(dirpath, n) for n in names if n.endswith(".py"))
    handlers = (ast.Try, ast.With, ast.AsyncWith, getattr(ast, "TryStar", ast.Try))
    for path in files:
        try:
            with open(path) as f:
                tree = ast.parse(f.read(), path)
        except (OSError, SyntaxError, ValueError):
            return True
        if any(isinstance(node, handlers) for node in ast.walk(tree)):
            return True
    return False


class Watch:
    """Audit hook + exception tracer for one phase ('load': import and construction; 'forward')."""

    def __init__(
        self,
        classifier: FrameClassifier,
        phase: str = FORWARD,
        protected_paths: Iterable[str] = (),
        trace_exceptions: bool = True,
        record=None,
    ):
        self.classifier = classifier
        self.phase = phase
        self.protected = tuple(os.path.abspath(p) for p in protected_paths)
        self.trace_exceptions = trace_exceptions and phase == FORWARD
        self.violations: list[_checks.Violation] = []
        self.exceptions: list[_checks.Violation] = []
        self._record_external = record
        self._prev_trace = None
        self._tracing = False
        self._tool: int | None = None
        self._codes: dict = {}
        self._local = self._trace_local
        self._tracer = self._make_tracer()  # one function object, so identity checks work
        self._exc_ids: set[int] = set()
        self._exc_refs: list[BaseException] = []

    # -- lifecycle
    def __enter__(self) -> Watch:
        install_audit_hook()
        _ACTIVE.append(self)
        if self.trace_exceptions:
            if _MONITORING is not None and self._start_monitoring():
                return self
            self._prev_trace = sys.gettrace()
            if self._prev_trace is None:  # never fight a debugger or coverage tool for the trace slot
                _LOCAL.busy = True
                try:
                    sys.settrace(self._tracer)
                finally:
                    _LOCAL.busy = False
                self._tracing = True
        return self

    def _start_monitoring(self) -> bool:
        for tool in range(6):
            if _MONITORING.get_tool(tool) is None:
                _MONITORING.use_tool_id(tool, "kernels_env.guard")
                self._tool = tool
                _MONITORING.register_callback(tool, _MONITORING.events.EXCEPTION_HANDLED, self._on_handled)
                _MONITORING.set_events(tool, _MONITORING.events.EXCEPTION_HANDLED)
                return True
        return False

    def _on_handled(self, code, offset, exc):
        if self._is_candidate_code(code):
            self._note_exception(exc, describe_code(code, offset))

    def __exit__(self, *exc) -> None:
        if self._tool is not None:
            _MONITORING.set_events(self._tool, 0)
            _MONITORING.register_callback(self._tool, _MONITORING.events.EXCEPTION_HANDLED, None)
            _MONITORING.free_tool_id(self._tool)
            self._tool = None
        if self._tracing:
            _LOCAL.busy = True
            try:
                if sys.gettrace() is not self._tracer:
                    self._record(
                        _checks.Violation(_checks.INTROSPECTION, "the exception tracer was replaced")
                    )
                sys.settrace(None)
            finally:
                _LOCAL.busy = False
            self._tracing = False
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    def _record(self, v: _checks.Violation) -> None:
        self.violations.append(v)
        if self._record_external is not None:
            self._record_external(v)

    def _record_by(self, caller: FrameType | None, check: str, message: str, evidence: dict | None = None):
        """Record what ``caller`` (a candidate frame; None: not the candidate's doing, nothing) did."""
        if caller is not None:
            self._record(_checks.Violation(check, message, {**(evidence or {}), "frame": describe(caller)}))

    # -- attribution
    def _candidate_caller(self, frame: FrameType | None) -> FrameType | None:
        """The candidate frame that made this call directly (or through inspect/traceback helpers)."""
        hops = 0
        while frame is not None and hops < 4:
            kind = self.classifier.classify(frame.f_code.co_filename)
            if kind in (CANDIDATE, REFERENCE):
                return frame
            if not frame.f_code.co_filename.endswith(_HELPER_MODULES):
                return None
            frame, hops = frame.f_back, hops + 1
        return None

    def _is_protected(self, path) -> bool:
        if not self.protected or not isinstance(path, (str, bytes, os.PathLike)):
            return False
        try:
            p = os.path.abspath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        if f"{os.sep}__pycache__{os.sep}" in p:
            return False  # bytecode caches of modules being imported
        return any(p == r or p.startswith(r + os.sep) for r in self.protected)

    # -- audit events
    def _channel_or_memory(self, path) -> bool:
        """Opening the judge's reply channel or this process's memory: refused, whoever asks."""
        if isinstance(path, int):
            hit = path in messages.CHANNEL_FDS
            what = f"file descriptor {path}"
        elif isinstance(path, (str, bytes)):
            text = os.fsdecode(path)
            if _MEM_PATH.match(text):
                self._record(
                    _checks.Violation(
                        _checks.INTROSPECTION, f"opened {text} (raw process memory)", {"path": text}
                    )
                )
                return True
            m = _FD_PATH.match(text)
            hit = bool(m) and int(m.group(1)) in messages.CHANNEL_FDS
            what = text
        else:
            return False
        if hit:
            self._record(
                _checks.Violation(
                    _checks.PROTOCOL_FORGERY, f"opened the judge's protocol channel ({what})", {"path": what}
                )
            )
        return hit

    def _on_event(self, event: str, args: tuple) -> None:
        if event in ("compile", "exec"):
            caller = self._candidate_caller(sys._getframe(2))
            if caller is not None:
                COMPILED_BY_CANDIDATE.add(os.path.abspath(caller.f_code.co_filename))
            return
        if event == "open":
            path, mode = args[0], args[1] if len(args) > 1 else "r"
            if self._channel_or_memory(path):
                return
            writing = isinstance(mode, str) and any(c in mode for c in "wax+")
            if not writing and len(args) > 2 and isinstance(args[2], int):
                writing = bool(args[2] & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC))
            if writing and self._is_protected(path):
                self._record(
                    _checks.Violation(
                        _checks.VERIFIER_WRITE,
                        f"candidate opened protected file {path!r} for writing",
                        {"path": os.fsdecode(path)},
                    )
                )
            return
        if event in _PATH_EVENTS:
            idx = _PATH_EVENTS[event]
            if (
                len(args) > idx
                and self._is_protected(args[idx])
                or (
                    event in ("os.rename", "os.replace", "shutil.move")
                    and len(args) > 1
                    and self._is_protected(args[1])
                )
            ):
                self._record(
                    _checks.Violation(
                        _checks.VERIFIER_WRITE,
                        f"{event} on a protected path",
                        {"args": [repr(a) for a in args[:2]]},
                    )
                )
            return
        if event in _SPAWN_EVENTS:
            # Kernel runtimes and torch spawn compilers on a first launch (Triton runs ptxas and builds its
            # driver helper with cc): allowed. Anyone else spawning during forward works outside the judged
            # process; while loading, builders legitimately run compilers, but a bare fork by candidate code
            # (a copy of this process that keeps its descriptors, the reply channel among them) is refused.
            frame, kind = self.classifier.user_frame(sys._getframe(2), skip=(STDLIB,))
            runtime = kind in (RUNTIME, TORCH, JUDGE)
            forked = (
                event in ("os.fork", "os.forkpty") and self._candidate_caller(sys._getframe(2)) is not None
            )
            if (self.phase == FORWARD and not runtime) or forked:
                where = "during forward" if self.phase == FORWARD else "by candidate code while loading"
                evidence = {"args": repr(args)[:300], "frame": describe(frame)}
                self._record(_checks.Violation(_checks.SUBPROCESS, f"{event} {where}", evidence))
            return
        if (
            event == "object.__setattr__"
            and len(args) >= 2
            and args[1] in ("__code__", "__defaults__", "__kwdefaults__")
        ):
            caller = self._candidate_caller(sys._getframe(2))
            code = getattr(args[0], "__code__", None)
            target_file = code.co_filename if code is not None else ""
            if self.classifier.classify(target_file) not in (CANDIDATE, REFERENCE):
                what = f"{args[1]} of {getattr(args[0], '__qualname__', args[0])!r}"
                self._record_by(caller, _checks.JUDGE_TAMPERED, f"candidate replaced {what}")
            return
        if event == "object.__getattr__":
            if len(args) >= 2 and args[1] in _FRAME_ATTRS:
                caller = self._candidate_caller(sys._getframe(2))
                self._record_by(caller, _checks.INTROSPECTION, f"candidate read .{args[1]} (frame walking)")
            return
        if event in _INTROSPECTION_EVENTS:
            caller = self._candidate_caller(sys._getframe(2))
            self._record_by(caller, _checks.INTROSPECTION, f"candidate called {event}", {"event": event})

    # -- exception watcher
    def _is_candidate_code(self, code) -> bool:
        name = code.co_filename  # str hashes are cached; code-object hashes are not
        hit = self._codes.get(name)
        if hit is None:
            hit = self._codes[name] = self.classifier.classify(name) == CANDIDATE
        return hit

    def _note_exception(self, exc: BaseException, where: str) -> None:
        if isinstance(exc, (StopIteration, StopAsyncIteration, GeneratorExit)) or id(exc) in self._exc_ids:
            return
        self._exc_ids.add(id(exc))
        self._exc_refs.append(exc)  # keep it alive so its id is not reused
        self.exceptions.append(
            _checks.Violation(
                _checks.SWALLOWED_EXCEPTION,
                f"{type(exc).__name__} caught inside candidate code during forward: {str(exc)[:200]}",
                {"type": type(exc).__name__, "frame": where},
            )
        )

    def _make_tracer(self):
        # Called on every Python function call while the guard is on: keep it to one dict lookup.
        known = self._codes
        local = self._local
        is_candidate = self._is_candidate_code

        def tracer(frame, event, arg):
            hit = known.get(frame.f_code.co_filename)
            if hit is None:
                hit = is_candidate(frame.f_code)
            if hit:
                frame.f_trace_lines = False
                return local
            return None

        return tracer

    def _trace_local(self, frame: FrameType, event: str, arg):
        if event == "exception":
            self._note_exception(arg[1], describe(frame))
        return self._local
