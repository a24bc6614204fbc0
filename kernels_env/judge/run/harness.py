"""What a run worker does with one request: load, check correctness over trials and adversarial families,
time, check again; and baselines.

Runs inside the worker process (never in the caller's), under the reward-hack defences of
``kernels_env.judge.run.enforce`` (docs/reward_hacks.md, "The judge's pipeline"):

0. (each request) the memory plan: the reference's footprint measured on fresh inputs, the free memory, what
   fits (``kernels_env.judge.check.memory``); an out-of-memory of the judge is retried once, then
   ``judge_error``;
1. the solution is imported and ``ModelNew`` built under ``RequestGuard.loading`` (introspection and writes
   to judge/problem files refused); then judge code, torch's global state and the problem module are checked;
2. trials on fresh inputs, alternating candidate-first and reference-first order (the reference's output
   freed, into poisoned memory, before the candidate runs); every candidate call is guarded (dispatch-level
   interception, kernel census, poisoned allocations, threads, streams, launch errors, input mutation) and
   its output must honour the output contract; the first trial asks the same question three times
   (determinism);
3. the adversarial families (``kernels_env.judge.run.families``), each reported separately, fatal per
protocol; 4. timing without interception (the audit hook only), then a profiler-only audit call,
thread/judge/state
   checks and unguarded correctness re-checks (``kernels_env.judge.run.timed_checks``).

Every failure of the candidate becomes a verdict payload (a failed check: ``rejected`` with ``check`` and
``evidence``); a broken reference is reported as ``problem_error`` (never blamed on the candidate).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from ...guard._checks import JUDGE_TAMPERED, SUBPROCESS
from ...host.cache import JsonCache
from ...host.gpu_lock import SHARED as SHARED_LOCK
from ...rules.messages import BaselineRequest, EvaluateRequest, Source
from ...rules.policies import PolicyViolation, guard_enforced
from ...rules.protocols import JudgeSettings
from ...rules.result import COMPILE_ERROR, CORRECT, INCORRECT, JUDGE_ERROR, REJECTED, RUNTIME_ERROR, message
from ..build import loader
from ..build.diagnostics import exception_line
from ..build.errors import LoadError, ProblemError
from ..check import (
    adversarial,  # noqa: F401 - registers the adversarial input families
    memory,
    oom,
)
from ..check.compare import compare, max_errors
from ..check.inputs import clone, fresh_seed, make_inputs, nbytes, problem_module, spec
from ..timing import gpu_share
from ..timing.baselines import baseline_key, cached_baselines, measure
from . import hygiene, preflight, timed_checks
from .enforce import RequestGuard, tainted
from .families import run_families
from .hygiene import reset_extension_versioner, restore_global_state
from .models import Reference, after_load, build_models, guarded, reference
from .request import JudgeRequest, Progress
from .timed_checks import input_sets as _input_sets
from .timed_checks import timing_settings as _timing_settings
from .verdict import Verdict, call_candidate, call_problem, rejected, unexpected

_call_problem, _candidate = call_problem, call_candidate


@contextlib.contextmanager
def request_env(env: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _solution_display(source: Source) -> tuple[str, str | None]:
    if source.files is not None:
        return f"{source.name}/{source.entry}", source.name
    return Path(source.name).name, None


def evaluate(
    req: EvaluateRequest, device: torch.device, progress: Progress, report: Callable[..., None] | None = None
) -> dict[str, Any]:
    """One request's record. ``report``: the supervisor's host-memory fields (``memory.Sections``)."""
    s = JudgeSettings.from_dict(req.judge)
    gpu_share.require(s.timing_lock)
    memory.cap_to_share(device, s.device_shared_by)
    sections = memory.Sections(report)
    sections.send(owner="judge")  # until the candidate's import: the reference's and the judge's code
    workdir = Path(req.workdir)
    record: dict[str, Any] = {
        "status": None,
        "stage": "load",
        "error": None,
        "messages": [],
        "check": None,
        "evidence": None,
        "correctness": None,
        "timings": None,
    }
    children = hygiene.child_processes()
    progress = _tracked(progress, record)
    with request_env(req.env):
        reset_extension_versioner()
        try:
            ref_path = loader.materialize(req.reference, workdir / "reference")
            problem = loader.load_problem(ref_path, req.reference.name)
            progress("load", "memory estimate")
            too_large = preflight.check(problem, device, s.device_shared_by)
            if too_large is not None:  # before the candidate's import and any input: nothing large exists
                raise Verdict(**too_large)
            display, workspace = _solution_display(req.solution)
            try:
                sol_path = loader.materialize(req.solution, workdir / "solution")
            except LoadError as exc:
                raise Verdict(exc.status, "load", exc.error, exc.messages) from None
            guard = RequestGuard(s.policy, device, sol_path.parent, ref_path)
            guard.sections = sections
            guard.shared_by = s.device_shared_by
            guard.watch_problem(problem.loaded.module)
            failed = None
            with guard.loading():
                try:
                    loaded, model_new = loader.load_solution(sol_path, display, workspace)
                except LoadError as exc:
                    failed = exc
            after_load(guard, "while the solution was imported")  # before the restore below hides it
            restore_global_state()  # an import may not change how the reference computes
            if failed is not None:
                raise Verdict(failed.status, "load", failed.error, failed.messages)
            record.update(
                _judge(problem, loaded, model_new, s, device, progress, guard, record, req.memory_retry)
            )
        except Verdict as v:
            record.update(v.payload)
        except ProblemError as exc:
            record["problem_error"] = str(exc)
        except PolicyViolation as exc:  # a guard check outside a wrapper: still the candidate's rejection
            record.update(rejected(exc, record["stage"]).payload)
        except Exception as exc:  # escaped every candidate/reference wrapper: whose it is, by its traceback
            record.update(unexpected(exc, record["stage"], workdir / "solution", workdir / "reference"))
        finally:
            restore_global_state()
    lost = gpu_share.lost(SHARED_LOCK)  # only code in this process can close or release it: the candidate's
    if lost is not None and record.get("status") != REJECTED:
        error = f"policy check 'judge_tampered' failed: {lost}"
        record.update(status=REJECTED, check=JUDGE_TAMPERED, error=error)
        record["evidence"] = {"gpu_lock": lost, "stage": record.get("stage")}
    leftover = hygiene.kill_new_children(children)
    if leftover and record.get("status") != REJECTED:  # work outside the judged process (catalogue #7)
        error = f"the candidate left {len(leftover)} process(es) running after its request (killed)"
        record.update(status=REJECTED, check=SUBPROCESS, error=f"policy check 'subprocess' failed: {error}")
        record["evidence"] = {"processes": leftover, "stage": record.get("stage")}
    record["guard_enforced"] = guard_enforced()
    record["worker_tainted"] = bool(leftover) or (
        record["status"] == REJECTED and tainted(record.get("check"))
    )
    return record


def _tracked(progress: Progress, record: dict[str, Any]) -> Progress:
    """``progress`` that also keeps the stage in ``record`` (where an unexpected failure happened)."""

    def report(stage: str, detail: str) -> None:
        record["stage"] = stage
        progress(stage, detail)

    return report


def _judge(problem, loaded, model_new, s, device, progress: Progress, guard, record: dict, retried: bool):
    """``_judge_once`` under the memory plan's out-of-memory rule (``kernels_env.judge.check.memory``): the
    candidate's own OOM with its promised headroom is its ``runtime_error``; the judge's OOM is retried once
    with the smaller plan, then ``judge_error``. The plan in force is recorded in ``record``. ``retried``:
    the client's retry after the judge's host-memory breach killed the first attempt (only the smaller plan).
    """
    reason, plan = "", None
    for retry in (True,) if retried else (False, True):
        record.pop("memory_plan", None)  # the plan in force: made anew by each attempt
        try:
            return _judge_once(problem, loaded, model_new, s, device, progress, guard, record, retry)
        except oom.OutOfMemory as exc:
            plan = record.get("memory_plan") or plan
            if _candidates_own(exc, record.get("memory_plan")):
                raise exc.verdict from None
            whose = "inside the candidate, short of its headroom" if exc.in_candidate else "judge code"
            reason = f"{exc} ({whose})"
        except (torch.OutOfMemoryError, RuntimeError) as exc:  # judge code outside call_problem/candidate
            if not oom.is_oom(exc):
                raise
            plan = record.get("memory_plan") or plan
            reason = f"{exception_line(exc)} (judge code)"
        memory.release(device)  # after the except block: the traceback's frames (and tensors) are gone
        if not retry:
            progress("load", "out of memory in the judge: retrying with the smaller memory plan")
    if plan is not None:
        record["memory_plan"] = plan
    return {
        "status": JUDGE_ERROR,
        "stage": "correctness",
        "error": f"the judge ran out of memory twice (the second time with its smaller plan): {reason}",
        "messages": [message("note", "not the candidate's failure: no reward; see judge.memory_plan")],
    }


def _candidates_own(exc: oom.OutOfMemory, plan: dict | None) -> bool:
    """An OOM raised in the candidate's code is its own while building (the judge holds only the reference's
    model then) and, later, when the plan left it its promised headroom; the verdict names the headroom."""
    if not exc.in_candidate or exc.verdict is None:
        return False
    if plan is None:
        return True
    if not plan["headroom_ok"]:
        return False
    exc.verdict.payload["error"] += (
        f" (out of memory with {memory.size(plan['headroom_bytes'])} left to the candidate,"
        f" {memory.HEADROOM:g}x the reference's footprint or more)"
    )
    return True


def _judge_once(problem, loaded, model_new, s, device, progress: Progress, guard, record: dict, retry: bool):
    init_inputs = _call_problem("get_init_inputs()", lambda: list(problem.get_init_inputs()))
    try:
        loader.check_call(model_new, init_inputs, "ModelNew", COMPILE_ERROR)
    except LoadError as exc:
        raise Verdict(exc.status, "load", exc.error) from None
    progress("load", "building models")
    ref_model, new_model, sync = build_models(problem, loaded, model_new, init_inputs, s, device, guard)
    correctness = {
        "trials": s.num_trials,
        "trials_run": 0,
        "passed": 0,
        "seeds": [],
        "weight_sync": sync,
        "mode": s.mode,
        "order": s.order,
        "input_family": s.input_family,
        "tolerances": s.tolerances,
        "max_abs_error": 0.0,
        "max_rel_error": 0.0,
        "determinism": None,
        "families": {},
        "rechecks": [],
        "census": None,
        "torch_ops": [],
    }
    req = JudgeRequest(problem, loaded, s, device, guard, progress, correctness)
    notes = req.notes
    guard.notes = notes  # the guard's notes (e.g. an output in another memory format) join the verdict's
    run_new = guarded(guard, new_model, s, device)
    run_ref = reference(ref_model)
    progress("load", "memory plan")
    req.memory = _plan(req, run_ref, memory.param_bytes(ref_model), retry)
    record["memory_plan"] = req.memory.to_dict()
    guard.sections.allow(req.memory.host_bytes, record["memory_plan"])  # kept if the worker is killed
    for trial in range(s.num_trials):
        if trial:
            memory.between_phases(req)  # the last trial's tensors are dead: free them before new inputs
        progress("correctness", f"trial {trial + 1}/{s.num_trials}")
        seed = fresh_seed()
        correctness["seeds"].append(seed)
        correctness["trials_run"] = trial + 1
        mismatch = _trial(req, new_model, (run_ref, run_new), seed, trial)
        correctness["census"] = guard.census
        correctness["torch_ops"] = guard.torch_ops
        if mismatch is not None:
            correctness.update(failed_trial=trial, mismatch=mismatch)
            return {
                "status": INCORRECT,
                "stage": "correctness",
                "correctness": correctness,
                "error": f"trial {trial + 1}/{s.num_trials}: {mismatch['text']}",
                "messages": [*notes, message("mismatch", trial=trial, seed=seed, **mismatch)],
            }
        correctness["passed"] = trial + 1
    _call_guard(guard.after_trials, stage="correctness")

    def rebuild(args: list[Any]):  # the init_args family: both models built with other constructor arguments
        seed = fresh_seed()
        ref2, new2, _ = build_models(problem, loaded, model_new, args, s, device, guard, seed)

        def control() -> Reference:  # the task's own arguments with the rebuilt models' weights (same seed)
            torch.manual_seed(seed)
            ref = _call_problem("Model(*get_init_inputs())", problem.Model, *clone(init_inputs))
            ref = _call_problem("Model.to(device)", ref.to, device)
            torch.manual_seed(fresh_seed())  # as after every build: the weight seed's stream is not left on
            return reference(ref.train(s.mode == "train"))

        return reference(ref2), guarded(guard, new2, s, device), control

    memory.between_phases(req)
    runners = (run_ref, run_new)
    failed = run_families(req, runners, rebuild, init_inputs)
    correctness["torch_ops"] = guard.torch_ops  # the families' calls included
    if failed is not None:
        fam = correctness["families"][failed]
        return {
            "status": INCORRECT,
            "stage": "correctness",
            "correctness": {**correctness, "failed_family": failed},
            "error": f"input family {failed!r} ({fam['status']}): {fam['reason']}",
            "messages": notes,
        }
    out = {"status": CORRECT, "stage": "done", "correctness": correctness, "messages": notes}
    memory.between_phases(req)
    progress("timing", "timing the candidate" if s.time_candidate else "checks after the trials")
    timings = timed_checks.run(req, new_model, run_ref)
    if timings is not None:
        out["timings"] = {"candidate": timings}
    progress("done", "final checks")
    _call_guard(guard.verify, "at the end of the request", stage="done")
    return out


def _plan(req: JudgeRequest, run_ref, params: int, retry: bool) -> memory.MemoryPlan:
    """Measure the reference on fresh inputs (its answer is dropped before any candidate runs), then plan
    with the free memory that remains."""
    s, device = req.settings, req.device
    shapes = _meta_inputs(req.problem)  # what the inputs will take, before any exist (None: unknown)
    if shapes is not None:
        req.guard.sections.allow(memory.measuring_host_bytes(nbytes(shapes), device.type))
    inputs = _call_problem("get_inputs()", make_inputs, req.problem, fresh_seed(), s.input_family, device)
    footprint = _call_problem("Model.forward", memory.measure, run_ref, inputs, params, device)
    del inputs
    free, source, share = memory.free_bytes(device, s.memory_budget_gb, s.device_shared_by)
    wanted = s.timing["num_input_sets"] if s.time_candidate else 1
    return memory.plan(
        footprint, free, s.families, wanted, device.type, source, retry, s.device_shared_by, share
    )


def _call_guard(fn: Callable[..., Any], *args: Any, stage: str) -> Any:
    try:
        return fn(*args)
    except PolicyViolation as exc:
        raise rejected(exc, stage) from None


def _order(order: str, trial: int) -> str:
    if order == "alternate":
        return "candidate_first" if trial % 2 == 0 else "reference_first"
    return order


def _trial(req: JudgeRequest, new_model, runners, seed: int, trial: int) -> dict | None:
    """One correctness trial on fresh inputs; the mismatch (or None). Updates the error record."""
    run_ref, run_new = runners
    problem, s, guard, correctness, notes = req.problem, req.settings, req.guard, req.correctness, req.notes
    where = req.where("correctness")
    tolerances = s.tolerances
    restore_global_state()  # what a candidate's forward changed must not shape the next inputs
    inputs = _call_problem("get_inputs()", make_inputs, problem, seed, s.input_family, guard.device)
    if trial == 0:
        try:  # binds the signature only (no call): no copy of the inputs needed
            loader.check_call(new_model.forward, inputs, "ModelNew.forward", RUNTIME_ERROR)
        except LoadError as exc:
            raise Verdict(exc.status, "correctness", exc.error) from None
    if _order(s.order, trial) == "reference_first":
        # The reference's own output is freed (its block poisoned by the guard) before the candidate runs.
        ref_out = _call_problem("Model.forward", run_ref, clone(inputs))
        expected = clone(ref_out)
        del ref_out
        new_in = clone(inputs)
        got = _candidate(run_new, new_in, **where)
    else:  # candidate first: no reference output exists yet that it could read
        new_in = clone(inputs)
        got = _candidate(run_new, new_in, **where)
        expected = _call_problem("Model.forward", run_ref, clone(inputs))
    _candidate(guard.check_output, got, expected, new_in, tolerances, **where)
    if trial == 0:  # the same question twice more: races and uninitialised reads disagree with themselves
        answers = [got]
        for _ in range(2):
            again_in = clone(inputs)
            again = _candidate(run_new, again_in, **where)
            _candidate(guard.check_output, again, expected, again_in, tolerances, **where)
            answers.append(again)
        _candidate(guard.check_determinism, answers, tolerances, **where)
        correctness["determinism"] = {"repeats": len(answers), "agree": True}
    mismatch = compare(expected, got, tolerances)  # judge code on outputs that passed the output contract
    if mismatch is not None:  # never blame the candidate for a reference that disagrees with itself
        again = _call_problem("Model.forward", run_ref, clone(inputs))
        if compare(expected, again, tolerances) is not None:
            text = f"trial {trial + 1}: the reference gave different outputs for the same inputs; "
            notes.append(message("note", text + "the candidate was compared with a second evaluation of it"))
            expected = again
            mismatch = compare(expected, got, tolerances)
            if mismatch is not None:
                mismatch["reference_reproducible"] = False
    if mismatch is None:
        abs_err, rel_err = max_errors(expected, got)
        correctness["max_abs_error"] = max(correctness["max_abs_error"], abs_err)
        correctness["max_rel_error"] = max(correctness["max_rel_error"], rel_err)
    return mismatch


def baselines(
    req: BaselineRequest,
    device: torch.device,
    env: Mapping[str, Any],
    progress: Progress,
    report: Callable[..., None] | None = None,
) -> dict:
    s = JudgeSettings.from_dict(req.judge)
    gpu_share.require(s.timing_lock)
    memory.cap_to_share(device, s.device_shared_by)
    try:
        problem = loader.load_problem(
            loader.materialize(req.reference, Path(req.workdir)), req.reference.name
        )
        init_inputs = _call_problem("get_init_inputs()", lambda: list(problem.get_init_inputs()))
        sample = _call_problem("get_inputs()", _input_sample, problem, device)
    except ProblemError as exc:
        return {"problem_error": str(exc)}
    # Host memory the reference's timing holds (judge.check.memory): on a CPU its input sets, output and
    # temporaries; on a GPU one set of inputs built on the host.
    one = max(nbytes(sample), 1)
    sets = max(1, min(int(s.timing["num_input_sets"]), memory.INPUT_BYTES_BUDGET[device.type] // one))
    more_sets = (sets - 1) * one if device.type == "cpu" else 0
    memory.Sections(report).allow(memory.measuring_host_bytes(one, device.type) + more_sets)
    modes = [m for m in req.modes if device.type == "cuda" or m == "eager"]
    skipped = {
        m: {"skipped": "torch.compile baselines are measured on a GPU only"}
        for m in req.modes
        if m not in modes
    }
    keys = {
        m: baseline_key(req.reference.text or "", spec(sample), spec(init_inputs), env, m, s) for m in modes
    }
    state: dict[str, Any] = {}

    def compute(mode: str) -> dict[str, Any]:
        progress("baseline", mode)
        try:
            if "sets" not in state:
                state["sets"] = _input_sets(problem, s, device)
                torch.manual_seed(fresh_seed())
                model = _call_problem("Model(...)", lambda: problem.Model(*clone(init_inputs)))
                state["model"] = model.to(device).train(s.mode == "train")
        except ProblemError as exc:
            return {"error": str(exc)}
        timing = dataclasses.replace(s, timing=_timing_settings(s, device))
        return measure(state["model"], mode, state["sets"], timing, device)

    cache = JsonCache(Path(req.cache_dir) / "baselines")
    out = cached_baselines(cache, keys, compute)
    state.clear()
    return {"baselines": {**out, **skipped}, "comparable": device.type == "cuda"}


def _meta_inputs(problem) -> list[Any] | None:
    """The task's inputs on the meta device (shapes and dtypes, no data), from a fresh module; None when its
    ``get_inputs`` cannot run there."""
    try:
        with torch.device("meta"):
            return list(problem_module(problem).get_inputs())
    except Exception:  # noqa: BLE001 - data-dependent inputs (numpy, ...): unknown until built
        return None


def _input_sample(problem, device: torch.device) -> list[Any]:
    """The task's inputs for their shapes and dtypes only: on the meta device (no data) when it can."""
    sample = _meta_inputs(problem)
    return sample if sample is not None else make_inputs(problem, fresh_seed(), "random", device)
