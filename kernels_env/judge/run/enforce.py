"""The reward-hack defences of ``kernels_env.guard`` inside the real judge (docs/reward_hacks.md).

Per run worker, ``start_worker`` runs once before any candidate code: profiler and ATen thread-pool warm-up,
then snapshots of the judge's code (``Integrity``: torch, timers, checkers, every ``kernels_env`` module and
class), torch's global state and the thread table, and on a GPU the device's copy bandwidth (for the roofline
floor). Per request a ``RequestGuard`` knows the candidate's and the reference's files and the policy's
rules, and provides every step of the judge's pipeline (``kernels_env.judge.run.harness``):

- ``loading()`` around import and construction (``load_guard``: introspection, writes to judge/problem files,
  threads left running), then ``after_load`` (judge code, precision flags and global state unchanged);
- ``call`` = one guarded forward (``policies.policy_guard``, which this module points at the guard), then
  ``check_output`` (output contract, never-written elements, constant answers) and the reference's weights
  and module constants;
- ``tripwires()`` around unguarded calls (timing, re-checks): the audit hook only, no interception;
- ``after_timing``: a profiler-only audit call on an input set the candidate has already seen (a replayed
  answer launches nothing), threads, judge code and global state;
- ``verify`` at the end: nothing was patched after the last check.

Every failure raises ``GuardViolation`` (a ``policies.PolicyViolation``): the verdict is ``rejected`` with the
check's name and evidence. ``TAINTING`` checks also retire the worker process (``worker_tainted``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...guard import (
    GuardViolation,
    Integrity,
    ThreadSnapshot,
    TimingAudit,
    TorchGlobalState,
    Violation,
    _checks,
    _watch,
    bitwise_equal,
    check_outputs,
    constant_output_violation,
    determinism_violations,
    layout_notes,
    load_guard,
    poisoned_output_violations,
    policy_guard,
    reused_output_violations,
    roofline_floor_s,
    speed_violations,
    thread_violations,
    warm_up_intra_op_pool,
    warm_up_profiler,
)
from ...guard._frames import PACKAGE_DIR, FrameClassifier
from ...guard._watch import FORWARD, Watch
from ...rules import policies
from ...rules.result import message
from ..check.memory import Sections
from ..timing import gpu_share
from ..timing.timer import copy_seconds

JUDGE_DIR = PACKAGE_DIR  # the whole kernels_env package, not only judge/
# A rejection for one of these means the candidate changed this process (judge code, the reply channel, the
# guard's own modes, threads it left running): the worker is replaced after the request.
TAINTING = frozenset(
    {
        _checks.JUDGE_TAMPERED,
        _checks.PROTOCOL_FORGERY,
        _checks.GUARD_BYPASS,
        _checks.GUARD_ERROR,
        _checks.BACKGROUND_THREAD,
        _checks.INTROSPECTION,
        _checks.REFERENCE_TAMPERED,
    }
)
ROOFLINE_BANDWIDTH_FACTOR = 2.0  # peak = 2x the measured device copy bandwidth: only impossible times fail
# Below this floor the timer's resolution (overhead-corrected medians of a few microseconds) decides, not
# physics: the floor is reported but not enforced.
ROOFLINE_MIN_FLOOR_S = 20e-6


def _enforcing_guard(policy: policies.Policy, **context: Any):
    context.pop("stage", None)
    return policy_guard(policy.name, **context)


policies.GUARD_FACTORY = _enforcing_guard  # every ModelNew.forward the judge guards now runs under the guard


@dataclass
class WorkerSnapshot:
    """What the judge looked like before any candidate code ran in this process."""

    device: torch.device
    integrity: Integrity
    state: TorchGlobalState
    threads: ThreadSnapshot
    peak_bandwidth: float | None  # bytes/s used for the roofline floor (GPU only)
    # Measured holding the GPU lock exclusive (run workers sharing the GPU under exclusive timing): no other
    # worker's work shared the copy, so the floor needs no allowance for them (``roofline``).
    bandwidth_alone: bool = False


WORKER: WorkerSnapshot | None = None


def start_worker(device: torch.device) -> WorkerSnapshot:
    """Capture the worker's baseline (call once, after every judge import, before any candidate code)."""
    global WORKER
    cuda = device.type == "cuda"
    warm_up_profiler(cuda)
    warm_up_intra_op_pool()  # its threads belong to the baseline, not to the first candidate that needs them
    _install_dynamo_module_tagging()
    bandwidth, alone = None, False
    if cuda:
        with gpu_share.exclusive(device, gpu_share.START_WAIT_S) as alone:
            bandwidth = _copy_bandwidth(device)
    WORKER = WorkerSnapshot(
        device=device,
        integrity=Integrity.capture(),
        state=TorchGlobalState.capture(),
        threads=ThreadSnapshot.capture(),
        peak_bandwidth=bandwidth * ROOFLINE_BANDWIDTH_FACTOR if bandwidth else None,
        bandwidth_alone=alone,
    )
    return WORKER


def _install_dynamo_module_tagging() -> None:
    """torch.compile wraps ``nn.Module.__init__``/``__setstate__`` the first time it runs (baselines do, in
    this worker): do it now, so the judge's integrity baseline already holds the wrapped functions and a
    later baseline is not mistaken for a candidate replacing judge code."""
    with contextlib.suppress(Exception):
        from torch._dynamo.mutation_guard import install_generation_tagging_init

        install_generation_tagging_init()


def _copy_bandwidth(device: torch.device) -> float | None:
    """Device-to-device copy bandwidth (read + write bytes per second), best of five 256 MiB copies."""
    try:
        nbytes = 256 * 2**20
        best = min(copy_seconds(device, nbytes, iters=5))
        torch.cuda.empty_cache()
        return 2 * nbytes / best if best > 0 else None
    except Exception:  # noqa: BLE001 - no floor then (reported as null), never a failed worker
        return None


def _tolerance(out: Any, tolerances: Mapping[str, Sequence[float]]) -> tuple[float, float]:
    """(atol, rtol) of the first floating output's dtype."""
    leaves = out if isinstance(out, (list, tuple)) else [out]
    for t in leaves:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            key = str(t.dtype).removeprefix("torch.")
            atol, rtol = tolerances.get(key, tolerances.get("float32", (1e-4, 1e-4)))
            return float(atol), float(rtol)
    return tuple(tolerances.get("float32", (1e-4, 1e-4)))  # type: ignore[return-value]


def _honest(v: Violation) -> bool:
    """Shape and structure mistakes are wrong answers (``incorrect``, from the comparison), not hacks."""
    return v.check == _checks.OUTPUT_SHAPE or bool(v.evidence.get("structure"))


def _constants(module: Any) -> dict[str, str]:
    return {
        k: repr(v)
        for k, v in vars(module).items()
        if not k.startswith("__") and isinstance(v, (int, float, str, bool, tuple, type(None)))
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class RequestGuard:
    """The guard's view of one evaluate request (see the module doc)."""

    def __init__(self, policy: str, device: torch.device, candidate_dir: Path, reference_file: Path):
        self.policy = policy
        self.rules = policies.get_policy(policy)
        self.device = device
        self.snap = WORKER if WORKER is not None and WORKER.device == device else start_worker(device)
        self.candidate_paths = [str(candidate_dir)]
        self.reference_paths = [str(reference_file)]
        self.protected_paths = [JUDGE_DIR]
        self.classifier = FrameClassifier(self.candidate_paths, self.reference_paths)
        self.census: dict[str, Any] | None = None
        self._torch_ops: dict[str, dict[str, Any]] = {}
        self.notes: list[dict[str, Any]] = []  # verdict notes (the harness shares its list here)
        self.calls = 0
        self.shared_by = 1  # run workers sharing the device (the harness sets it): see ``copy_bandwidth``
        self._references: list[tuple[torch.nn.Module, list[tuple[str, torch.Tensor]]]] = []
        self._forbidden: list[Any] = []
        self._problem_module: Any = None
        self._problem_constants: dict[str, str] = {}
        self._may_catch: bool | None = None
        self._reused: list[Violation] = []  # output_reused seen in trial 0, raised by after_trials
        # Whose code runs, for the supervisor's host-memory limit (the harness gives it the request's
        # channel): entered around exactly the candidate's code below (loading, guarded forward, tripwires).
        self.sections = Sections()

    def _trace_exceptions(self) -> bool:
        """The exception tracer is needed only where a candidate frame can catch an exception (see
        ``guard._watch.may_catch``); with ``sys.monitoring`` (Python >= 3.12) it costs nothing anyway."""
        if _watch.monitoring_available():
            return True
        if self._may_catch is None:
            self._may_catch = _watch.may_catch(self.candidate_paths)
        compiled = any(
            f.startswith(p + os.sep) or f == p
            for f in _watch.COMPILED_BY_CANDIDATE
            for p in self.candidate_paths
        )
        return self._may_catch or compiled

    # -- loading ------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        """Import or construction of candidate code; violations are raised by ``after_load``."""
        before = ThreadSnapshot.capture()
        with (
            load_guard(
                candidate_paths=self.candidate_paths,
                reference_paths=self.reference_paths,
                protected_paths=self.protected_paths,
            ) as found,
            self.sections.candidate(),
        ):
            try:
                yield
            finally:
                self._load_found = getattr(self, "_load_found", []) + list(found)
        self._load_found += thread_violations(before, self.classifier)  # threads it left running

    def after_load(self, where: str = "while the candidate was loaded") -> None:
        found = list(getattr(self, "_load_found", []))
        self._load_found = []
        found += self._judge_state(where)
        if found:
            raise GuardViolation(found)

    def watch_problem(self, problem_module: Any) -> None:
        """The loaded problem module's constants (sizes, hyper-parameters) must not change (catalogue #11)."""
        self._problem_module = problem_module
        self._problem_constants = _constants(problem_module)

    def watch_reference(self, model: torch.nn.Module, model_class: type) -> None:
        """Reference weights must not change while candidate code runs, and the reference must not run
        inside the candidate's forward."""
        params = [(n, p.detach().clone()) for n, p in model.named_parameters()]
        self._references.append((model, params))
        self._forbidden = [model, model_class]

    def _reference_violations(self, where: str) -> list[Violation]:
        for model, params in self._references:
            now = dict(model.named_parameters())
            for name, before in params:
                if name not in now or not bitwise_equal(before, now[name].detach()):
                    return [
                        Violation(
                            _checks.REFERENCE_TAMPERED,
                            f"reference parameter {name} changed {where}",
                            {"tensor": name},
                        )
                    ]
        if self._problem_module is not None:
            changed = sorted(
                k for k, v in self._problem_constants.items() if _constants(self._problem_module).get(k) != v
            )
            if changed:
                return [
                    Violation(
                        _checks.REFERENCE_TAMPERED,
                        f"the problem's module constants {changed[:5]} changed {where}",
                        {"constants": changed[:20]},
                    )
                ]
        return []

    def _judge_state(self, where: str) -> list[Violation]:
        """Judge code, torch global state (both restored when changed) and the reference."""
        snap = self.snap
        found = snap.integrity.violations(where)
        if found:
            snap.integrity.restore()
        changed = snap.state.violations(where=where)
        if snap.state.diff():  # harmless flags (``HARMLESS_FLAGS``) are restored too, unreported
            snap.state.restore()
        return found + changed + self._reference_violations(where)

    # -- guarded forward ----------------------------------------------------------------------------------
    def call(self, model: torch.nn.Module, inputs: Sequence[Any]) -> Any:
        """One guarded forward (every correctness call: warm-up, trials, families)."""
        buffers = [(n, b.detach().clone()) for m, _ in self._references for n, b in m.named_buffers()]
        first = self.calls == 0
        self.calls += 1
        with (
            torch.no_grad(),
            policies.policy_guard(
                self.policy,
                inputs=inputs,
                reference=self._forbidden,
                reference_paths=self.reference_paths,
                candidate_paths=self.candidate_paths,
                protected_paths=self.protected_paths,
                thread_baseline=self.snap.threads,
                integrity=self.snap.integrity,
                device=self.device,
                os_threads=not first,  # runtimes start helper threads lazily on the first call
                trace_exceptions=self._trace_exceptions(),
                copy_bandwidth=self.copy_bandwidth,
            ) as g,
            self.sections.candidate(),  # inside the guard: its own copies (entry, exit) are the judge's
        ):
            out = g(model, *inputs)
        if g.census is not None:
            self.census = g.census.to_dict()
        self._merge_torch_ops(g.torch_op_summary)
        found = self._reference_violations("during forward")
        now = {n: b for m, _ in self._references for n, b in m.named_buffers()}
        for name, before in buffers:
            # NaN-aware: a train-mode BatchNorm reference run on the nan_inf family holds NaN running stats,
            # and NaN != NaN must not read as the candidate changing them.
            if name in now and not bitwise_equal(before, now[name].detach()):
                found.append(
                    Violation(_checks.REFERENCE_TAMPERED, f"reference buffer {name} changed during forward")
                )
                break
        if found:
            raise GuardViolation(found)
        return out

    @property
    def copy_bandwidth(self) -> float | None:
        """The device's copy rate (bytes/s, read + write) for the work share's pass over the outputs; like the
        roofline's, scaled by the run workers that may have shared the start-up measurement (only lenient)."""
        peak = self.snap.peak_bandwidth
        if peak is None:
            return None
        rate = peak / ROOFLINE_BANDWIDTH_FACTOR
        return rate if self.snap.bandwidth_alone else rate * max(1, self.shared_by)

    def _merge_torch_ops(self, summary: list[dict[str, Any]]) -> None:
        """Per operator, the most calls and the largest device-time share seen in any one guarded call."""
        for entry in summary:
            seen = self._torch_ops.setdefault(entry["op"], {"op": entry["op"], "count": 0, "share": None})
            seen["count"] = max(seen["count"], entry["count"])
            if entry["share"] is not None:
                seen["share"] = max(seen["share"] or 0.0, entry["share"])

    @property
    def torch_ops(self) -> list[dict[str, Any]]:
        """``correctness.torch_ops`` of the verdict: the PyTorch operators the candidate's forward ran."""
        return sorted(self._torch_ops.values(), key=lambda e: (-e["count"], e["op"]))

    def _note(self, text: str) -> None:
        if not any(n.get("text") == text for n in self.notes):
            self.notes.append(message("note", text))

    def check_output(
        self,
        got: Any,
        expected: Any,
        inputs: Sequence[Any],
        tolerances: Mapping[str, Sequence[float]],
        poisoned: bool = True,
    ) -> None:
        """The output contract (type, storage, device, dtype, strides, aliasing), never-written elements
        (``poisoned``: the call was guarded) and constant answers. Shape/structure mistakes are left to the
        value comparison (``incorrect``)."""
        found = [v for v in check_outputs(got, expected, inputs) if not _honest(v)]
        if not found:
            for text in layout_notes(got, expected):
                self._note(text)
        if not found and poisoned:
            found = poisoned_output_violations(got)
        if not found:
            atol, rtol = _tolerance(expected, tolerances)
            v = constant_output_violation(got, expected, atol, rtol)
            found = [v] if v is not None else []
        if found:
            raise GuardViolation(found)

    def check_determinism(self, outputs: Sequence[Any], tolerances: Mapping[str, Sequence[float]]) -> None:
        """The answers of repeated calls on the same inputs, all still held, must agree; whether they share
        storage is noted here (only while all are alive can it be seen) and reported by ``after_trials``."""
        self._reused = reused_output_violations(list(outputs))
        atol, rtol = _tolerance(outputs[0], tolerances)
        for other in outputs[1:]:
            found = determinism_violations(outputs[0], other, atol, rtol)
            if found:
                raise GuardViolation(found)

    def after_trials(self) -> None:
        """After every trial passed: a static output buffer seen in trial 0 (``output_reused``). Reported
        this late on purpose: a cache that returns one stored tensor is also wrong on fresh inputs, and that
        mismatch (the trials') is the more telling verdict."""
        if self._reused:
            raise GuardViolation(self._reused)

    # -- unguarded calls ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def tripwires(self) -> Iterator[None]:
        """The audit hook only (introspection, file writes, subprocesses) around unguarded candidate calls: no
        interception and no exception tracer, so the timed calls pay nothing measurable."""
        watch = Watch(self.classifier, FORWARD, self.protected_paths + self.reference_paths, False)
        with watch, self.sections.candidate():
            yield
        if watch.violations:
            raise GuardViolation(watch.violations)

    def after_timing(self, model: torch.nn.Module, seen_inputs: Sequence[Any]) -> None:
        """After the timed calls: one profiler-only audit call on inputs the candidate was timed on (a
        replayed answer launches no kernel; PyTorch compute shows in the trace), then threads, judge code and
        global state."""
        _sync(self.device)
        audit = TimingAudit(self.rules, self.device, copy_bandwidth=self.copy_bandwidth)
        with torch.no_grad(), self.tripwires(), audit:
            audit.watch_output(model(*seen_inputs))
        _sync(self.device)
        found = [Violation(v.check, v.message, {**v.evidence, "phase": "timing"}) for v in audit.violations]
        found += thread_violations(self.snap.threads, self.classifier)
        found += self._judge_state("during the timed calls")
        if found:
            raise GuardViolation(found)

    def verify(self, where: str) -> None:
        found = self._judge_state(where) + thread_violations(self.snap.threads, self.classifier)
        if found:
            raise GuardViolation(found)

    # -- speed --------------------------------------------------------------------------------------------
    def roofline(
        self, median_ms: float, inputs: Sequence[Any], outputs: Any, shared_by: int = 1
    ) -> dict[str, Any]:
        """The floor for this task and device (GPU); ``below_roofline`` when the median beats physics (floors
        under ``ROOFLINE_MIN_FLOOR_S`` are reported only: there the timer's resolution decides).
        ``shared_by``: run workers sharing the GPU. Unless it held the GPU lock (``bandwidth_alone``), the
        copy bandwidth measured at this worker's start may then have been shared with as many others, so
        the peak is scaled by them: only impossible times fail, never an honest candidate measured against
        a disturbed start-up copy."""
        peak = self.snap.peak_bandwidth
        if peak is None:
            return {"roofline_floor_ms": None}
        if not self.snap.bandwidth_alone:
            peak *= max(1, shared_by)
        outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        floor = roofline_floor_s(inputs, outs, peak)
        found = speed_violations(median_ms / 1e3, floor) if floor >= ROOFLINE_MIN_FLOOR_S else []
        if found:
            raise GuardViolation(found)
        return {"roofline_floor_ms": floor * 1e3, "roofline_bandwidth_gbs": peak / 1e9}


def tainted(check: str | None) -> bool:
    return check in TAINTING


def fingerprint(values: Sequence[Any]) -> list[tuple[int, int]]:
    """Cheap content fingerprints of input tensors (sum and position-weighted sum of their 32-bit words, in
    chunks): timing inputs are checked for in-place writes without keeping a second copy of them."""
    out = []
    for v in values:
        total = weighted = 0
        if isinstance(v, torch.Tensor) and v.numel() and v.layout == torch.strided:
            raw = v.detach().contiguous().reshape(-1).view(torch.uint8)
            words = raw[: raw.numel() // 4 * 4].view(torch.int32)
            step = 1 << 24
            for start in range(0, words.numel(), step):
                chunk = words[start : start + step].to(torch.int64)
                weights = torch.arange(start, start + chunk.numel(), device=chunk.device) % 1021 + 1
                total += int(chunk.sum())
                weighted += int((chunk * weights).sum())
        out.append((total, weighted))
    return out


def input_mutation(where: str) -> GuardViolation:
    return GuardViolation(
        Violation(_checks.INPUT_MUTATION, f"an input tensor was modified in place {where}", {"phase": where})
    )
