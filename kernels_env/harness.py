"""What a run worker does with one request: load, check correctness over trials, time; and baselines.

Runs inside the worker process (never in the caller's). Every failure of the candidate becomes a verdict
payload; a broken reference is reported as ``problem_error`` (a user error, never blamed on the candidate).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from . import loader
from .baselines import baseline_key, cached_baselines, measure, set_precision
from .build import NO_DEVICE
from .cache import JsonCache
from .compare import compare, max_errors
from .diagnostics import exception_line
from .inputs import clone, fresh_seed, make_inputs, nbytes, spec
from .loader import LoadError, ProblemError
from .policies import PolicyViolation, guard_enforced, policy_guard
from .protocol import BaselineRequest, EvaluateRequest, Source
from .result import (
    COMPILE_ERROR,
    CORRECT,
    INCORRECT,
    NOT_RUN,
    REJECTED,
    RUNTIME_ERROR,
    message,
)
from .timing import time_callable
from .worker_state import reset_extension_versioner, restore_global_state

CPU_TIMING = {"warmup_iters": 1, "min_iters": 3, "max_iters": 10, "target_time_s": 0.2}
INPUT_BYTES_BUDGET = {"cuda": 8 * 2**30, "cpu": 2**30}  # bytes of rotated timing inputs kept at once

Progress = Callable[[str, str], None]


class Verdict(Exception):
    """Ends a request early with a verdict for the candidate."""

    def __init__(self, status: str, stage: str, error: str, messages=None, check=None, evidence=None):
        super().__init__(error)
        self.payload = {
            "status": status,
            "stage": stage,
            "error": error,
            "messages": list(messages or []),
            "check": check,
            "evidence": evidence,
        }


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


def _candidate_failure(
    exc: BaseException, loaded: loader.Loaded, stage: str, device: torch.device
) -> Verdict:
    if isinstance(exc, PolicyViolation):
        return Verdict(
            REJECTED,
            stage,
            f"policy check {exc.check!r} failed: {exc}",
            check=exc.check,
            evidence=exc.evidence,
        )
    if isinstance(exc, Verdict):
        return exc
    err = loader.classify_exception(exc, loaded, RUNTIME_ERROR, during=stage)
    if device.type == "cpu" and err.status == RUNTIME_ERROR and NO_DEVICE.search(str(exc)):
        return Verdict(NOT_RUN, stage, f"needs a CUDA device (CPU mode): {exception_line(exc)}", err.messages)
    return Verdict(err.status, stage, err.error, err.messages)


def evaluate(req: EvaluateRequest, device: torch.device, progress: Progress) -> dict[str, Any]:
    s = req.judge
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
    with request_env(req.env):
        reset_extension_versioner()
        try:
            problem = loader.load_problem(
                loader.materialize(req.reference, workdir / "reference"), req.reference.name
            )
            display, workspace = _solution_display(req.solution)
            try:
                sol_path = loader.materialize(req.solution, workdir / "solution")
                loaded, model_new = loader.load_solution(sol_path, display, workspace)
            except LoadError as exc:
                raise Verdict(exc.status, "load", exc.error, exc.messages) from None
            finally:
                restore_global_state()  # an import may not change how the reference computes
            record.update(_judge(problem, loaded, model_new, s, device, progress))
        except Verdict as v:
            record.update(v.payload)
        except ProblemError as exc:
            record["problem_error"] = str(exc)
    record["guard_enforced"] = guard_enforced()
    return record


def _call_problem(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run reference code: its failures are the problem's (``ProblemError``), never the candidate's."""
    try:
        return fn(*args)
    except (Verdict, ProblemError):
        raise
    except Exception as exc:
        raise ProblemError(f"reference {what} failed: {exception_line(exc)}") from None


def _candidate(fn: Callable[..., Any], *args: Any, loaded, stage: str, device: torch.device) -> Any:
    """Run candidate code (or code on its outputs): its failures become the candidate's verdict."""
    try:
        return fn(*args)
    except BaseException as exc:  # also SystemExit / KeyboardInterrupt raised by the candidate
        raise _candidate_failure(exc, loaded, stage, device) from None


def _judge(problem, loaded, model_new, s: Mapping[str, Any], device: torch.device, progress: Progress):
    init_inputs = _call_problem("get_init_inputs()", lambda: list(problem.get_init_inputs()))
    try:
        loader.check_call(model_new, init_inputs, "ModelNew", COMPILE_ERROR)
    except LoadError as exc:
        raise Verdict(exc.status, "load", exc.error) from None
    progress("load", "building models")
    ref_model, new_model, sync = _build_models(problem, loaded, model_new, init_inputs, s, device)
    correctness = {
        "trials": s["num_trials"],
        "trials_run": 0,
        "passed": 0,
        "seeds": [],
        "weight_sync": sync,
        "mode": s["mode"],
        "order": s["order"],
        "input_family": s["input_family"],
        "tolerances": s["tolerances"],
        "max_abs_error": 0.0,
        "max_rel_error": 0.0,
    }
    notes: list[dict[str, Any]] = []
    run_new = _guarded(new_model, s, device, "correctness")
    run_ref = _reference(ref_model)
    for trial in range(s["num_trials"]):
        progress("correctness", f"trial {trial + 1}/{s['num_trials']}")
        seed = fresh_seed()
        correctness["seeds"].append(seed)
        correctness["trials_run"] = trial + 1
        mismatch = _trial(
            problem, loaded, new_model, (run_ref, run_new), seed, trial, s, device, correctness, notes
        )
        if mismatch is not None:
            correctness.update(failed_trial=trial, mismatch=mismatch)
            return {
                "status": INCORRECT,
                "stage": "correctness",
                "correctness": correctness,
                "error": f"trial {trial + 1}/{s['num_trials']}: {mismatch['text']}",
                "messages": [*notes, message("mismatch", trial=trial, seed=seed, **mismatch)],
            }
        correctness["passed"] = trial + 1
    out = {"status": CORRECT, "stage": "done", "correctness": correctness, "messages": notes}
    if s["time_candidate"]:
        progress("timing", "timing the candidate")
        out["timings"] = {"candidate": _time_candidate(problem, loaded, new_model, s, device)}
    return out


def _trial(problem, loaded, new_model, runners, seed, trial, s, device, correctness, notes) -> dict | None:
    """One correctness trial on fresh inputs; the mismatch (or None). Updates the error record."""
    run_ref, run_new = runners
    tolerances = s["tolerances"]
    where = {"loaded": loaded, "stage": "correctness", "device": device}
    restore_global_state()  # what a candidate's forward changed must not shape the next inputs
    inputs = _call_problem("get_inputs()", make_inputs, problem, seed, s["input_family"], device)
    ref_in, new_in = clone(inputs), clone(inputs)
    if trial == 0:
        try:
            loader.check_call(new_model.forward, new_in, "ModelNew.forward", RUNTIME_ERROR)
        except LoadError as exc:
            raise Verdict(exc.status, "correctness", exc.error) from None
    if s["order"] == "reference_first":
        expected = _call_problem("Model.forward", run_ref, ref_in)
        got = _candidate(run_new, new_in, **where)
    else:
        got = _candidate(run_new, new_in, **where)
        expected = _call_problem("Model.forward", run_ref, ref_in)
    mismatch = _candidate(compare, expected, got, tolerances, **where)
    if mismatch is not None:  # never blame the candidate for a reference that disagrees with itself
        again = _call_problem("Model.forward", run_ref, clone(inputs))
        if compare(expected, again, tolerances) is not None:
            text = f"trial {trial + 1}: the reference gave different outputs for the same inputs; "
            notes.append(message("note", text + "the candidate was compared with a second evaluation of it"))
            expected = again
            mismatch = _candidate(compare, expected, got, tolerances, **where)
            if mismatch is not None:
                mismatch["reference_reproducible"] = False
    if mismatch is None:
        abs_err, rel_err = max_errors(expected, got)
        correctness["max_abs_error"] = max(correctness["max_abs_error"], abs_err)
        correctness["max_rel_error"] = max(correctness["max_rel_error"], rel_err)
    return mismatch


def _timing_settings(s: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    timing = dict(s["timing"])
    if device.type == "cpu":
        timing.update({k: min(timing[k], v) if k != "target_time_s" else v for k, v in CPU_TIMING.items()})
        timing["min_iters"] = min(timing["min_iters"], timing["max_iters"])
    return timing


def _input_sets(problem, s: Mapping[str, Any], device: torch.device) -> list[list[Any]]:
    first = _call_problem("get_inputs()", lambda: make_inputs(problem, fresh_seed(), "random", device))
    wanted = max(1, int(s["timing"]["num_input_sets"]))
    size = max(nbytes(first), 1)
    k = max(1, min(wanted, INPUT_BYTES_BUDGET[device.type] // size))
    return [first] + [
        _call_problem("get_inputs()", lambda: make_inputs(problem, fresh_seed(), "random", device))
        for _ in range(k - 1)
    ]


def _reference(model: torch.nn.Module) -> Callable[[list[Any]], Any]:
    def run(inputs: list[Any]) -> Any:
        restore_global_state()
        set_precision(False)  # the reference is always computed in full FP32
        with torch.no_grad():
            return model(*inputs)

    return run


def _time_candidate(
    problem, loaded, model: torch.nn.Module, s: Mapping[str, Any], device: torch.device
) -> dict:
    """Time ModelNew exactly as the baselines are timed: the same loop, no_grad and precision set once
    around it (not per call); only the policy guard wraps each call."""
    sets = _input_sets(problem, s, device)
    policy = s["policy"]

    def call(*inputs: Any) -> Any:
        with policy_guard(policy, device=device, stage="timing"):
            return model(*inputs)

    set_precision(bool(s.get("allow_tf32")))
    try:
        with torch.no_grad():
            stats = _candidate(
                time_callable,
                call,
                sets,
                _timing_settings(s, device),
                device,
                loaded=loaded,
                stage="timing",
                device=device,
            )
    finally:
        set_precision(False)
    stats["input_sets"] = len(sets)
    return stats


def _guarded(model: torch.nn.Module, s: Mapping[str, Any], device: torch.device, stage: str):
    def run(inputs) -> Any:
        set_precision(bool(s.get("allow_tf32")))
        try:
            with torch.no_grad(), policy_guard(s["policy"], device=device, stage=stage):
                out = model(*inputs)
            if device.type == "cuda":  # surface asynchronous kernel errors here, attributed to the candidate
                torch.cuda.synchronize(device)
            return out
        finally:
            set_precision(False)

    return run


def _build_models(problem, loaded, model_new, init_inputs, s, device):
    weight_seed = fresh_seed()
    torch.manual_seed(weight_seed)
    ref = _call_problem("Model(*get_init_inputs())", problem.Model, *clone(init_inputs))
    torch.manual_seed(weight_seed)  # seed replay: same parameters in the same order => same weights
    new = _candidate(model_new, *clone(init_inputs), loaded=loaded, stage="load", device=device)
    torch.manual_seed(fresh_seed())
    if not isinstance(new, torch.nn.Module):
        raise Verdict(
            COMPILE_ERROR, "load", f"ModelNew(...) returned a {type(new).__name__}, not an nn.Module"
        )
    sync = "seed"
    if s["weight_sync"] in ("state_dict", "auto"):
        ref_sd, new_sd = ref.state_dict(), new.state_dict()
        same = set(ref_sd) == set(new_sd) and all(ref_sd[k].shape == new_sd[k].shape for k in ref_sd)
        if same:
            _candidate(new.load_state_dict, ref_sd, loaded=loaded, stage="load", device=device)
            sync = "state_dict" if ref_sd else "none"
        elif s["weight_sync"] == "state_dict":
            missing, extra = sorted(set(ref_sd) - set(new_sd)), sorted(set(new_sd) - set(ref_sd))
            raise Verdict(
                RUNTIME_ERROR,
                "load",
                f"state_dict sync: ModelNew lacks {missing[:5]}, has extra "
                f"{extra[:5]} (or shapes differ); use weight_sync=seed or auto",
            )
    ref = _call_problem("Model.to(device)", ref.to, device)
    new = _candidate(new.to, device, loaded=loaded, stage="load", device=device)
    train = s["mode"] == "train"
    ref.train(train)
    new.train(train)
    return ref, new, {"method": sync, "seed": weight_seed}


def baselines(req: BaselineRequest, device: torch.device, env: Mapping[str, Any], progress: Progress) -> dict:
    s = req.judge
    try:
        problem = loader.load_problem(
            loader.materialize(req.reference, Path(req.workdir)), req.reference.name
        )
        init_inputs = _call_problem("get_init_inputs()", lambda: list(problem.get_init_inputs()))
        sample = _call_problem("get_inputs()", _input_sample, problem, device)
    except ProblemError as exc:
        return {"problem_error": str(exc)}
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
                state["model"] = model.to(device).train(s["mode"] == "train")
        except ProblemError as exc:
            return {"error": str(exc)}
        timing = {**s, "timing": _timing_settings(s, device)}
        return measure(state["model"], mode, state["sets"], timing, device)

    cache = JsonCache(Path(req.cache_dir) / "baselines")
    out = cached_baselines(cache, keys, compute)
    state.clear()
    return {"baselines": {**out, **skipped}, "comparable": device.type == "cuda"}


def _input_sample(problem, device: torch.device) -> list[Any]:
    """The task's inputs for their shapes and dtypes only: on the meta device (no data) when it can."""
    try:
        with torch.device("meta"):
            return list(problem.get_inputs())
    except Exception:
        return make_inputs(problem, fresh_seed(), "random", device)
