"""``policy_guard``: the context manager the judge wraps around every call of ModelNew's forward.

    with policy_guard("strict", inputs=inputs, reference=ref_model, reference_paths=[problem_file]) as g:
        out = g(model_new, *inputs)          # or: out = model_new(*inputs); g.watch_output(out)

On exit it stops interception and runs the after-the-fact checks; if anything failed it raises
``GuardViolation`` (first violation + all of them) even when the candidate swallowed the original error.
A plain exception from the candidate with no violation propagates unchanged (a runtime error, not a hack).
"""

from __future__ import annotations

import contextlib
import secrets
from collections import Counter
from collections.abc import Iterable
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from ..rules.policies import Policy, get_policy
from . import _checks
from ._census import TritonInterpreterCounter, census_from_profiler, census_violations, torch_op_summary
from ._checks import GuardViolation, Violation
from ._cuda import (
    clear_last_errors,
    launch_error_violations,
    snapshot_after_current_stream,
    stream_race_violations,
)
from ._dispatch import DispatchMode, FunctionMode, _storage_key, module_pre_hook
from ._frames import FrameClassifier
from ._memory import poison_free_cuda_memory
from ._outputs import tensors
from ._passthrough import PassthroughCodes, passthrough_codes
from ._speed import tensor_bytes
from ._state import Integrity, TorchGlobalState
from ._threads import ThreadSnapshot, thread_violations
from ._trace import trace_violations, unguarded_violations
from ._watch import FORWARD, Watch


class _Profiler:
    """Operator trace (+ CUDA activity on a GPU). On a CPU the legacy profiler is used: same RecordFunction
    tree, no Kineto start-up cost or helper thread."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        if cuda:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            self._prof = torch.profiler.profile(activities=acts)
        else:
            try:
                self._prof = torch.autograd.profiler.profile(use_kineto=False)
            except (TypeError, RuntimeError):  # a torch without the legacy profiler
                self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])

    def __enter__(self):
        self._prof.__enter__()
        return self

    def __exit__(self, *exc):
        return self._prof.__exit__(*exc)

    def events(self):
        prof = self._prof
        return prof.events() if hasattr(prof, "events") else prof.function_events


_WARM: set[bool] = set()


def warm_up_profiler(cuda: bool | None = None) -> None:
    """Start and stop the profiler once: its first use starts helper threads (and Kineto initialises), which
    must exist before the judge takes its thread baseline. Idempotent; call it at worker start."""
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized() if cuda is None else cuda
    if cuda in _WARM:
        return
    with _Profiler(cuda):
        torch.empty(1, device="cuda" if cuda else "cpu")
    _WARM.add(cuda)


_CHUNK = 1 << 24  # elements per step: the input-mutation check allocates no temporary of an input's size
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Unchanged: the same bits, or (floats) the same values with NaN in the same places. Compared in chunks
    of the raw words first (equal bits: done; nearly always the case)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    fa, fb = a.reshape(-1), b.reshape(-1)
    bits = _BITS.get(a.element_size()) if a.dtype != torch.bool else None
    for start in range(0, fa.numel(), _CHUNK):
        x, y = fa[start : start + _CHUNK], fb[start : start + _CHUNK]
        if bits is not None and torch.equal(x.view(bits), y.view(bits)):
            continue
        if not (a.is_floating_point() and _same_values(x, y)) and not torch.equal(x, y):
            return False
    return True


def _same_values(x: torch.Tensor, y: torch.Tensor) -> bool:
    nan_x, nan_y = torch.isnan(x), torch.isnan(y)
    return bool(torch.equal(nan_x, nan_y) and torch.equal(x[~nan_x], y[~nan_y]))


class Guard:
    """Interception + after-the-fact checks for one forward call. Not re-entrant; one per call."""

    def __init__(
        self,
        policy: object = "strict",
        *,
        inputs: Iterable[Any] = (),
        reference: Any = None,
        reference_paths: Iterable[str] = (),
        candidate_paths: Iterable[str] | None = None,
        protected_paths: Iterable[str] = (),
        poison: bool = True,
        census: bool = True,
        trace: bool = True,
        watch: bool = True,
        threads: bool = True,
        thread_baseline: ThreadSnapshot | None = None,
        os_threads: bool = True,
        integrity: Integrity | None = None,
        device: torch.device | str | None = None,
        trace_exceptions: bool = True,
        copy_bandwidth: float | None = None,
    ):
        self.rules: Policy = get_policy(policy)
        self.copy_bandwidth = copy_bandwidth  # bytes/s (GPU): one pass over the outputs, for the work share
        self.inputs = list(inputs)
        refs = (
            reference
            if isinstance(reference, (list, tuple))
            else ([reference] if reference is not None else [])
        )
        self.forbidden_modules = tuple(refs)
        self.classifier = FrameClassifier(candidate_paths, reference_paths)
        self.protected_paths = tuple(protected_paths) + tuple(reference_paths)
        self.poison = poison
        self.census_enabled = census
        self.trace_enabled = trace
        self.watch_enabled = watch
        self.threads_enabled = threads
        self.thread_baseline = thread_baseline
        self.os_threads = os_threads
        self.integrity = integrity
        self.trace_exceptions = trace_exceptions and self.rules.forbid_swallowed_exceptions
        dev = torch.device(device) if device is not None else self._infer_device()
        self.cuda = dev.type == "cuda" and torch.cuda.is_available()
        self.device = dev
        self.marker = f"guard::{secrets.token_hex(8)}"
        self.internal_marker = f"guard::internal::{secrets.token_hex(8)}"
        self.constructor_marker = f"guard::ctor::{secrets.token_hex(8)}"
        self.violations: list[Violation] = []
        self.census = None
        self.input_storages: set = set()
        self._internal = False
        self.dispatched = 0  # calls the dispatch mode judged (each leaves a marker in the trace)
        self.torch_ops: Counter[str] = Counter()  # PyTorch compute the dispatch mode let through, by op
        self.torch_op_summary: list[dict] = []  # ... with device-time shares, filled on exit
        self.passthrough_codes: PassthroughCodes = {}
        self._tf_stack: list[str] = []
        self._outputs: list[torch.Tensor] = []
        self._entered = False
        self.function_mode = FunctionMode(self)
        self.dispatch_mode = DispatchMode(self)

    def _infer_device(self) -> torch.device:
        for t in tensors(self.inputs):
            return t.device
        return torch.device("cpu")

    # -- recording
    def violate(self, check: str, message: str, evidence: dict | None = None):
        v = Violation(check, message, evidence or {})
        self.violations.append(v)
        raise GuardViolation(v)

    def _add(self, vs: Iterable[Violation]) -> None:
        self.violations.extend(vs)

    @contextlib.contextmanager
    def internal(self):
        prev, self._internal = self._internal, True
        try:
            yield
        finally:
            self._internal = prev

    # -- API
    def __call__(self, fn, *args, **kwargs):
        with self.internal():
            self.passthrough_codes = passthrough_codes(fn, self.forbidden_modules)
        out = fn(*args, **kwargs)
        self.watch_output(out)
        return out

    def watch_output(self, out: Any) -> Any:
        self._outputs = tensors(out)
        return out

    def __enter__(self) -> Guard:
        if self._entered:
            raise RuntimeError("a Guard guards one call; create a new one")
        self._entered = True
        warm_up_profiler(self.cuda)
        if self.integrity is None:
            self.integrity = Integrity.capture()
        self._state0 = TorchGlobalState.capture()
        before_profiler = ThreadSnapshot.capture()
        inputs = [t for t in tensors(self.inputs) if t.device.type != "meta"]
        self._input_copies = [(t, t.detach().clone()) for t in inputs]
        self.input_storages = {k for k in (_storage_key(t) for t in inputs) if k is not None}
        if self.cuda:
            torch.cuda.synchronize(self.device)
            if self.poison:
                self.poisoned_free_bytes = poison_free_cuda_memory(self.device)
            clear_last_errors()
        self._stack = contextlib.ExitStack()
        try:
            self._profiler = _Profiler(self.cuda) if (self.census_enabled or self.trace_enabled) else None
            if self._profiler is not None:
                self._stack.enter_context(self._profiler)
            # Threads the profiler itself starts (Kineto, first use) are not the candidate's.
            started = ThreadSnapshot.capture()
            base = self.thread_baseline or before_profiler
            extra = {k: v for k, v in started.os_threads.items() if k not in before_profiler.os_threads}
            self._threads0 = ThreadSnapshot(
                set(base.python) | (started.python - before_profiler.python), {**base.os_threads, **extra}
            )
            self._threads_enter = started
            self._triton = self._stack.enter_context(TritonInterpreterCounter()) if not self.cuda else None
            handle = torch.nn.modules.module.register_module_forward_pre_hook(module_pre_hook(self))
            self._stack.callback(handle.remove)
            self._watch = (
                Watch(
                    self.classifier,
                    FORWARD,
                    self.protected_paths,
                    trace_exceptions=self.trace_exceptions,
                    record=self.violations.append,
                )
                if self.watch_enabled
                else None
            )
            if self._watch is not None:
                self._stack.enter_context(self._watch)
            self._depths = (len(_get_current_function_mode_stack()), len(_get_current_dispatch_mode_stack()))
            self.function_mode.__enter__()
            self.dispatch_mode.__enter__()
        except Exception:
            self._stack.close()
            raise
        return self

    def _pop_modes(self) -> None:
        # The candidate may have popped our modes or left its own on the stack: detect, then clean up.
        d_stack = _get_current_dispatch_mode_stack()
        f_stack = _get_current_function_mode_stack()
        if (
            not d_stack
            or d_stack[-1] is not self.dispatch_mode
            or not f_stack
            or f_stack[-1] is not self.function_mode
        ):
            self.violations.append(
                Violation(
                    _checks.GUARD_BYPASS,
                    "the guard's interception modes were removed or buried under other modes during forward",
                )
            )
        # Pop what was pushed since __enter__ (ours and anything the candidate left), never the judge's own.
        f_depth, d_depth = self._depths
        with self.internal():
            while len(_get_current_dispatch_mode_stack()) > d_depth:
                _get_current_dispatch_mode_stack()[-1].__exit__(None, None, None)
            while len(_get_current_function_mode_stack()) > f_depth:
                _get_current_function_mode_stack()[-1].__exit__(None, None, None)

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self._finish(exc)
        except torch.OutOfMemoryError:
            raise  # the guard's own copies did not fit: the judge's failure (check.memory), never a verdict
        except Exception as internal:  # noqa: BLE001 - fail closed with the reason
            self.violations.append(
                Violation(_checks.GUARD_ERROR, f"guard failed while checking: {internal!r}")
            )
        finally:
            self._drop_tensors()
        if self.violations:
            raise GuardViolation(self.violations) from exc
        return False

    def _drop_tensors(self) -> None:
        """Let go of the call's inputs, outputs and input copies. The guard and its modes refer to each other
        (a reference cycle), so whatever it still holds lives until the next garbage collection: on a task
        with 16 GiB inputs that kept a whole trial's tensors alive into the next one (an H200 ran out of
        memory in trial 2 with 129 GiB held)."""
        self.inputs, self._outputs, self._input_copies = [], [], []

    def _finish(self, exc) -> None:
        launch: list[Violation] = []
        snapshots: list[torch.Tensor] = []
        try:
            self._pop_modes()
            # First of all: undo any patching of torch/timers/checkers, so the checks below run real code.
            tampered = self.integrity.violations("during forward")
            self._add(tampered)
            if tampered:  # restore sets back exactly what ``violations`` compares (~20 ms when nothing did)
                self.integrity.restore()
        finally:
            if self.cuda:
                try:
                    if self._outputs:
                        with record_function(self.internal_marker):
                            snapshots = snapshot_after_current_stream(self._outputs)
                except torch.OutOfMemoryError:
                    raise  # no room for the guard's snapshot: not a launch error of the candidate's
                except RuntimeError as err:  # a sticky error surfaces at the first synchronisation
                    launch = [Violation(_checks.LAUNCH_ERROR, f"CUDA error after forward: {str(err)[:300]}",
                                        {"sticky": True})]  # fmt: skip
                if not launch:
                    launch = launch_error_violations(self.device)
            try:
                self._stack.close()  # profiler (synchronises the device), hooks, audit/tracer, Triton counter
            except Exception as err:  # noqa: BLE001 - expected after a sticky CUDA error; else fail closed
                if not launch:
                    self.violations.append(
                        Violation(_checks.GUARD_ERROR, f"stopping the guard failed: {err!r}")
                    )
        if self.cuda:
            self._add(launch)
            if any(v.evidence.get("sticky") for v in launch):
                return  # the CUDA context is unusable: nothing further can be checked on this device
            self._add(stream_race_violations(self._outputs, snapshots))
        events = self._profiler.events() if self._profiler is not None else None
        if self.trace_enabled and events is not None:
            self._add(
                trace_violations(
                    events,
                    self.marker,
                    self.internal_marker,
                    self.rules,
                    self.dispatched,
                    self.constructor_marker,
                )
            )
        if self.census_enabled:
            if self.cuda and events is not None:
                self.census = census_from_profiler(events, self.internal_marker, self.marker)
            elif self._triton is not None:
                self.census = self._triton.census()
            if self.census is not None and exc is None:
                pass_us = _pass_us(self._outputs, self.copy_bandwidth)
                self._add(census_violations(self.census, self.rules, pass_us))
        self.torch_op_summary = torch_op_summary(self.torch_ops, self.census if self.cuda else None)
        where = "during forward"
        self._add(self._state0.violations(where=where))
        self._state0.restore()
        if self.threads_enabled:
            os_base = self._threads_enter if self.os_threads else None
            self._add(thread_violations(self._threads0, self.classifier, os_base))
        for original, copy in self._input_copies:
            if not bitwise_equal(original.detach(), copy):
                self.violations.append(
                    Violation(
                        _checks.INPUT_MUTATION,
                        "an input tensor was modified in place during forward",
                        {"shape": list(original.shape)},
                    )
                )
                break
        # Audit-hook violations were recorded as they happened; swallowed exceptions count if forward returned
        if self._watch is not None and exc is None and self.trace_exceptions:
            swallowed = [v for v in self._watch.exceptions if v.evidence.get("type") != "GuardViolation"]
            self.violations.extend(swallowed[:1])


class TimingAudit:
    """A profiler-only shadow of a timed call: no interception modes, so a candidate that behaves only while
    guarded is caught computing with PyTorch here (``forbidden_op``, phase 'timing'); on a GPU the kernel
    census applies too. ``violations`` is filled on exit; nothing is raised."""

    def __init__(
        self,
        policy: object = "strict",
        device: torch.device | str | None = None,
        census: bool = True,
        copy_bandwidth: float | None = None,
    ):
        self.rules = get_policy(policy)
        self.copy_bandwidth = copy_bandwidth
        self._outputs: list[torch.Tensor] = []
        dev = torch.device(device) if device is not None else torch.device("cpu")
        self.cuda = dev.type == "cuda" and torch.cuda.is_available()
        self.census_enabled = census
        self.violations: list[Violation] = []
        self.census = None

    def watch_output(self, out: Any) -> Any:
        self._outputs = tensors(out)
        return out

    def __enter__(self) -> TimingAudit:
        warm_up_profiler(self.cuda)
        if self.cuda:
            torch.cuda.synchronize()
        self._runtime_marker = f"guard::runtime::{secrets.token_hex(8)}"
        self._triton = TritonInterpreterCounter(self._runtime_marker).__enter__() if not self.cuda else None
        self._profiler = _Profiler(self.cuda).__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._profiler.__exit__(None, None, None)
        if self._triton is not None:
            self._triton.__exit__(None, None, None)
        events = self._profiler.events()
        self.violations.extend(unguarded_violations(events, self.rules, self._runtime_marker))
        if self.census_enabled and exc is None:
            self.census = census_from_profiler(events) if self.cuda else self._triton.census()
            pass_us = _pass_us(self._outputs, self.copy_bandwidth)
            self.violations.extend(census_violations(self.census, self.rules, pass_us))
        return False


def _pass_us(outputs: list[torch.Tensor], copy_bandwidth: float | None) -> float | None:
    """Microseconds one pass over the outputs' bytes takes at ``copy_bandwidth`` (None when unknown)."""
    if not copy_bandwidth or copy_bandwidth <= 0:
        return None
    return tensor_bytes(outputs) / copy_bandwidth * 1e6


def policy_guard(policy: object = "strict", **options: Any) -> Guard:
    """The judge's entry point: ``with policy_guard(policy, inputs=...) as g: out = g(model, *inputs)``.

    ``policy``: a policy name, ``Policy``, or the judge's policy object (looked up by ``.name``).
    Options (all optional): ``inputs`` (the tensors passed to forward: mutation checks), ``reference`` (the
    reference Model instance/class: calling it is a violation), ``reference_paths`` (problem files: their
    code must not run inside forward, and they are write-protected), ``candidate_paths`` (the solution's
    files/workspace; default: any code outside installed packages and kernels_env), ``protected_paths``
    (judge files/dirs), ``thread_baseline`` (a ``ThreadSnapshot`` taken before the candidate was loaded),
    ``device``, ``copy_bandwidth`` (the device's measured copy rate, bytes/s: the work share's pass over the
    outputs, ``_census._low_work``), and switches ``poison``, ``census``, ``trace``, ``watch``, ``threads``,
    ``trace_exceptions`` (all on by default; the judge turns the exception tracer off when the candidate
    cannot catch anything).
    """
    return Guard(policy, **options)


@contextlib.contextmanager
def load_guard(
    *,
    candidate_paths: Iterable[str] | None = None,
    reference_paths: Iterable[str] = (),
    protected_paths: Iterable[str] = (),
):
    """Wrap loading the candidate (import + construction): frame/gc introspection and writes to protected
    files are recorded. Yields a list that holds the violations when the block ends (nothing is raised, so
    the judge decides; typically: reject if non-empty)."""
    found: list[Violation] = []
    classifier = FrameClassifier(candidate_paths, reference_paths)
    watch = Watch(classifier, "load", tuple(protected_paths) + tuple(reference_paths), trace_exceptions=False)
    with watch:
        try:
            yield found
        finally:
            found.extend(watch.violations)
