"""The sandbox client: the one way callers (research/, benchmarks, the CLI) judge candidates.

    from kernels_env.client import SandboxClient
    from kernels_env.rules.config import SandboxConfig, JudgeConfig
    with SandboxClient(SandboxConfig(device="auto")) as sb:
        res = sb.evaluate(reference=REF, solution=SOL, judge=JudgeConfig())  # the result (docs/sandbox.md)
        base = sb.baseline(reference=REF)  # eager / compile / max-autotune timings
        prof = sb.tool("profile", {"reference": REF, "solution": SOL})  # diagnostics (docs/tools.md)

Candidates never run in this process: a compile stage imports them on CPU worker processes with the GPU
hidden (every kernel build is cached there), then a run worker on the device checks correctness and times
them. ``submit`` returns a future so many candidates can be in flight; the client is thread-safe.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from .judge import assemble, race_probe
from .judge.diagnostics import exception_line, truncate
from .judge.sources import display_stem, input_hashes, read_source, source_hash
from .rules import speed_of_light
from .rules._registry import Registry
from .rules.config import JudgeConfig, SandboxConfig, TimingConfig
from .rules.messages import BaselineRequest, CompileRequest, EvaluateRequest, Source
from .rules.protocols import resolve
from .rules.result import (
    COMPILE_ERROR,
    CORRECT,
    FAILURES,
    INCORRECT,
    INFRA_ERROR,
    INSUFFICIENT_MEMORY,
    JUDGE_ERROR,
    NO_SOLUTION,
    NO_VERDICT,
    NOT_RUN,
    REFERENCE_ERROR,
    REJECTED,
    RUNTIME_ERROR,
    STATUSES,
    TIMEOUT,
    TOOLCHAIN_MISSING,
    Result,
    message,
    new_result,
)
from .rules.results_file import VerdictProgress, append_line, read_results, resume_results
from .rules.rewards import REWARDS, get_reward
from .rules.summary import format_pass_rate, problem_set, read_batch_summary, summarize
from .runtime.fleet import make_fleet
from .runtime.supervisor import BrokenReference, JudgeFailure, SandboxError, WorkerFailure

# The config dataclasses, the project's one Registry type (research registers its own things in it), the
# reward registry, the result schema and its one status vocabulary (with the
# verdicts made outside the judge: ``Result.outside``), the KernelBench-style summary of many verdicts (and
# the batch summary a results file has beside it, with its problem set) and the resumable results file
# (keyed by name and input hashes) are part of the client API (research may import only the client,
# rules.messages and session).
__all__ = [
    "COMPILE_ERROR",
    "CORRECT",
    "FAILURES",
    "INCORRECT",
    "INFRA_ERROR",
    "INSUFFICIENT_MEMORY",
    "JUDGE_ERROR",
    "NOT_RUN",
    "NO_SOLUTION",
    "NO_VERDICT",
    "REFERENCE_ERROR",
    "REJECTED",
    "REWARDS",
    "Registry",
    "RUNTIME_ERROR",
    "STATUSES",
    "TIMEOUT",
    "TOOLCHAIN_MISSING",
    "Result",
    "BrokenReference",
    "JudgeConfig",
    "SandboxClient",
    "SandboxConfig",
    "SandboxError",
    "TimingConfig",
    "VerdictProgress",
    "append_line",
    "failure_reward",
    "format_pass_rate",
    "get_reward",
    "input_hashes",
    "read_results",
    "resume_results",
    "problem_set",
    "read_batch_summary",
    "summarize",
]


def failure_reward(reward: str) -> float | None:
    """What reward function ``reward`` gives a candidate that fails (e.g. -1 for CUDA Agent's tiers)."""
    return get_reward(reward)(INCORRECT, {})


class SandboxClient:
    def __init__(self, config: SandboxConfig | None = None, judge: JudgeConfig | None = None):
        self.config = config or SandboxConfig()
        self.default_judge = judge or JudgeConfig()
        self.cache_dir = Path(os.path.expanduser(self.config.cache_dir)).resolve()
        self._fleet = make_fleet(self.config, self.cache_dir, self._cache_env())  # config.backend
        self._lock = threading.Lock()
        self._baseline_locks: dict[tuple, threading.Lock] = {}
        self._baselines: dict[tuple, dict[str, Any]] = {}
        self._baseline_seconds: list[float] = []  # run-worker seconds per measured baseline
        self._baseline_gpu_wait: list[float] = []  # of which waiting for the GPU lock (shared GPUs only)
        self._prefetching: set[tuple] = set()
        self._rooflines: dict[str, dict[str, Any]] = {}  # reference hash -> the roofline tool's result

    # lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> SandboxClient:
        return self  # workers start on first use (or with an explicit ``start()``)

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        with self._lock:
            if not self._fleet.started:
                self._fleet.start()

    def close(self) -> None:
        with self._lock:
            self._fleet.close()

    @property
    def device(self) -> str | None:
        return self._fleet.device

    @property
    def cuda_arch(self) -> str:
        return self._fleet.cuda_arch

    @property
    def environment(self) -> dict[str, Any]:
        self.start()
        return self._fleet.environment()

    # public API ------------------------------------------------------------------------------------------
    def evaluate(self, reference: Any, solution: Any, judge: JudgeConfig | None = None, **names: str) -> dict:
        """Judge a solution (path, source text or workspace directory) against a reference: the result.

        Every request ends in a verdict, also when the reference is broken (``reference_error``) or the
        judge fails (``judge_error``, with its traceback); both without a reward. Raises only for input the
        caller gave (``FileNotFoundError``, or ``ValueError`` naming a file that is not UTF-8 text or
        cannot be read; bad settings) and ``SandboxError`` when the sandbox cannot work at all."""
        return self.submit(reference, solution, judge, **names).result()

    def submit(
        self,
        reference: Any,
        solution: Any,
        judge: JudgeConfig | None = None,
        *,
        problem: str | None = None,
        solution_name: str | None = None,
    ) -> concurrent.futures.Future:
        """Like ``evaluate`` but returns a future (sources are read now, in the caller's thread)."""
        ref = read_source(reference, "reference")
        sol = read_source(solution, "solution", allow_workspace=True)
        resolve(judge or self.default_judge, "cpu")  # bad settings fail before any worker starts
        self.start()
        if solution_name and sol.text is not None:
            sol = Source(name=solution_name, text=sol.text)  # tracebacks and diagnostics use this name
        settings = self._settings(judge)
        names = {"problem": problem or display_stem(ref), "solution": solution_name or sol.name}
        return self._fleet.executor.submit(self._evaluate, ref, sol, settings, names)

    def tool(self, name: str, args: dict | None = None, limits: dict | None = None) -> dict[str, Any]:
        """Run a diagnostic tool (``compile``, ``profile``, ``sanitize``, ``roofline``; docs/tools.md) in the
        sandbox's workers and return its response: ``{"protocol", "tool", "ok", "result", "text", "error",
        "elapsed_s", "truncated"}``.

        ``args``: the tool's JSON arguments; ``reference`` / ``solution`` are a path, the source text or (a
        solution) a workspace directory, read now in the caller's thread. ``limits``: ``time_s`` and
        ``max_output_bytes`` (per-tool defaults, ``kernels_env.tools.DEFAULT_TIME_S``); the whole call,
        building included, is bounded by ``time_s`` plus a short grace, and the response by
        ``max_output_bytes``. GPU tools (profile, sanitize, Triton compile reports) run on the run worker
        after the compile stage built the candidate's kernels (cached); compile and roofline run in a forked
        child of a compile worker. Never raises for a bad request or a failing candidate (the response says
        why); ``SandboxError`` only when the sandbox itself cannot work.
        """
        from .tools import TOOLS, ToolError, ToolLimits, error_response

        started = time.perf_counter()
        if name not in TOOLS:
            return error_response(name, f"unknown tool {name!r}; available: {sorted(TOOLS)}")
        if args is not None and not isinstance(args, dict):
            return error_response(name, "args must be a JSON object")
        try:
            lim = ToolLimits.from_dict(limits, name)
        except ToolError as exc:
            return error_response(name, str(exc))
        args = dict(args or {})
        try:
            ref = read_source(args.pop("reference"), "reference") if args.get("reference") else None
            sol = (
                read_source(args.pop("solution"), "solution", allow_workspace=True)
                if args.get("solution")
                else None
            )
        except (OSError, ValueError) as exc:
            return error_response(name, str(exc))
        self.start()
        from .runtime.tool_host import call_tool

        args["cache_dir"] = str(self.cache_dir)  # the tools' own cache (measured roofline ceilings)
        if name == "roofline" and self.device == "cuda":
            args.setdefault("device_name", self.environment.get("gpu"))
        env = (
            self._request_env(sol) if sol else {**self._cache_env(), "KERNELS_ENV_CUDA_ARCH": self.cuda_arch}
        )
        resp = call_tool(self._fleet, name, args, lim, ref, sol, env, started)
        resp.pop("duration_s", None)
        resp["elapsed_s"] = round(time.perf_counter() - started, 3)
        from .tools._registry import fit_response

        return fit_response(resp, lim.max_output_bytes)

    def baseline(self, reference: Any, judge: JudgeConfig | None = None) -> dict[str, Any]:
        """Timings of the reference in each of the judge's baseline modes (disk-cached)."""
        ref = read_source(reference, "reference")
        resolve(judge or self.default_judge, "cpu")
        self.start()
        settings = self._settings(judge)
        out = self._get_baselines(ref, settings)
        return {"problem": display_stem(ref), "device": self.device, **out}

    # internals -------------------------------------------------------------------------------------------
    def _settings(self, judge: JudgeConfig | None) -> dict[str, Any]:
        """The resolved judge settings on this client's device, shared by its run workers per device."""
        per, lock = self.config.run_workers_per_gpu, self._fleet.timing_lock
        return resolve(judge or self.default_judge, self.device, per, lock)

    def _cache_env(self) -> dict[str, str]:
        fastpath = str(self.cache_dir / "fastpath")
        return {"KERNELS_ENV_CACHE_DIR": fastpath, "KERNELS_ENV_SANDBOX_CACHE": str(self.cache_dir)}

    def _request_env(self, sol: Source) -> dict[str, str]:
        return {
            **self._cache_env(),
            "TORCH_EXTENSIONS_DIR": str(self.cache_dir / "torch_extensions" / source_hash(sol)[:16]),
            "TORCH_CUDA_ARCH_LIST": self.cuda_arch,
            "KERNELS_ENV_CUDA_ARCH": self.cuda_arch,
        }

    def _evaluate(self, ref: Source, sol: Source, settings: dict[str, Any], names: dict[str, str]) -> dict:
        """The verdict of one request. Only ``SandboxError`` (the sandbox cannot work) escapes: anything else
        that goes wrong on this side is the judge's failure, a ``judge_error`` verdict."""
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:12]
        durations: dict[str, float] = {}
        try:
            result = self._judge(ref, sol, settings, names, request_id, durations)
        except JudgeFailure as exc:
            result = self._fallback(assemble.judge_error("done", str(exc)), settings, names, request_id)
        except SandboxError:
            raise
        except Exception as exc:  # noqa: BLE001 - the client's own failure while assembling the verdict
            report = assemble.judge_error("done", exception_line(exc), truncate(traceback.format_exc()))
            result = self._fallback(report, settings, names, request_id)
        durations["total"] = round(time.perf_counter() - started, 3)
        result["durations_s"] = durations
        return result

    def _fallback(self, report: dict[str, Any], settings: dict[str, Any], names: dict[str, str], rid: str):
        """The judge_error verdict built from the schema alone: the assembly steps may be what failed."""
        try:
            environment = self._fleet.environment()  # never self.environment: it would restart a closed fleet
        except Exception:  # noqa: BLE001 - the verdict of a failure must not fail in turn
            environment = {}
        result = new_result(
            status=JUDGE_ERROR,
            stage=report["stage"],
            problem=names["problem"],
            solution=names["solution"],
            request_id=rid,
            error=report["error"],
            messages=report["messages"],
        )
        result.update(environment=environment, judge=dict(settings), reward_fn=settings.get("reward"))
        return result  # reward None: a judge error says nothing about the candidate

    def _judge(self, ref, sol, settings, names, request_id: str, durations: dict[str, float]) -> dict:
        # A request still queued when the client closed: it ends here. Request threads never start workers
        # (a restart from here would outlive the client: found as a CPU run of load_inline_throughput
        # --budget-s that hung at exit on its restarted workers).
        if not self._fleet.started:
            raise SandboxError("the sandbox client was closed before this request ran")
        workdir = self._fleet.tmp / f"req-{request_id}"
        env = self._request_env(sol)
        self._prefetch_baselines(ref, settings)
        try:
            report = _screen_compile(self._compile_stage(request_id, ref, sol, workdir, env, durations))
            if report.get("status") == "ok" and not (self.device == "cpu" and report.get("needs_cuda")):
                report = {
                    **self._run_stage(request_id, ref, sol, workdir, env, settings, durations),
                    "backends": report.get("backends", []),
                }
            elif report.get("status") == "ok":
                report = assemble.not_run(report)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if report.get("problem_error"):
            report = assemble.reference_error(report.get("stage", "load"), str(report["problem_error"]))
        result = assemble.verdict(report, settings, names, request_id, self._fleet.environment())
        candidate = (report.get("timings") or {}).get("candidate")
        if candidate is not None:
            t0 = time.perf_counter()
            try:
                assemble.add_timings(result, candidate, self._get_baselines(ref, settings))
                assemble.note_shared_device(result, settings)
                result["timings"]["speed_of_light"] = self._speed_of_light(ref, candidate)
            except (BrokenReference, JudgeFailure) as exc:  # judged, but no baseline: no speedup exists
                status = REFERENCE_ERROR if isinstance(exc, BrokenReference) else JUDGE_ERROR
                result.update(status=status, stage="timing", error=str(exc))
                note = "the candidate was judged; its baselines failed: no speedup and no reward"
                result["messages"].append(message("note", note))
            durations["baselines"] = round(time.perf_counter() - t0, 3)
        if race_probe.wants_probe(result, settings):
            t0 = time.perf_counter()
            race_probe.apply_probe(result, self._race_probe(ref, sol))
            durations["race_probe"] = round(time.perf_counter() - t0, 3)
        assemble.add_reward(result, settings["reward"])
        return result

    def _speed_of_light(self, ref: Source, candidate: dict[str, Any]) -> dict[str, Any]:
        """The task's roofline floor on this GPU (the ``roofline`` tool, once per reference) and the
        candidate's achieved fraction of it (``kernels_env.rules.speed_of_light``); n/a in CPU mode."""
        if self.device != "cuda":
            return speed_of_light.record(None, None, self.device)
        key = source_hash(ref)
        roof = self._rooflines.get(key)
        if roof is None:
            from .runtime.tool_host import call_tool
            from .tools import ToolLimits

            args = {"cache_dir": str(self.cache_dir), "device_name": self.environment.get("gpu")}
            env = {**self._cache_env(), "KERNELS_ENV_CUDA_ARCH": self.cuda_arch}
            lim = ToolLimits.from_dict(None, "roofline")
            resp = call_tool(self._fleet, "roofline", args, lim, ref, None, env, time.perf_counter())
            roof = resp.get("result") or {"note": resp.get("error") or "the roofline tool gave no result"}
            if resp.get("ok"):
                with self._lock:
                    self._rooflines[key] = roof
        return speed_of_light.record(roof, candidate.get("median_ms"), self.device)

    def _race_probe(self, ref: Source, sol: Source) -> dict[str, Any]:
        """The sanitize tool's racecheck on this candidate (kernels_env.judge.race_probe): its response."""
        from .runtime.tool_host import call_tool
        from .tools import ToolLimits

        args = {"tools": [race_probe.TOOL], "cache_dir": str(self.cache_dir)}
        lim = ToolLimits.from_dict(None, "sanitize")
        env = self._request_env(sol)
        return call_tool(self._fleet, "sanitize", args, lim, ref, sol, env, time.perf_counter())

    def _compile_stage(self, request_id, ref, sol, workdir, env, durations) -> dict[str, Any]:
        timeout = self.config.compile_timeout_s
        request = CompileRequest(
            id=request_id,
            reference=ref,
            solution=sol,
            workdir=str(workdir),
            timeout_s=timeout,
            env=env,
            import_timeout_s=min(self.config.import_timeout_s, timeout),
        )
        waited = time.perf_counter()
        with self._fleet.compile.acquire() as worker:
            started = time.perf_counter()
            durations["queued"] = round(started - waited, 3)
            try:
                payload = worker.call(request, timeout + 60).payload
            except WorkerFailure as exc:
                return assemble.worker_failure(exc, "compile")
            finally:
                durations["compile"] = round(time.perf_counter() - started, 3)
        builds = assemble.build_records(payload)
        if builds:  # which build path built each extension, and in how long
            durations["builds"] = builds
        return payload

    def _run_stage(self, request_id, ref, sol, workdir, env, settings, durations) -> dict[str, Any]:
        request = EvaluateRequest(
            id=request_id, reference=ref, solution=sol, workdir=str(workdir), judge=settings, env=env
        )
        first: str | None = None
        while True:
            waited = time.perf_counter()
            with self._fleet.run.acquire() as worker:
                started = time.perf_counter()
                durations["queued"] = round(durations.get("queued", 0.0) + started - waited, 3)
                try:
                    reply = worker.call(request, self.config.run_timeout_s)
                    break
                except WorkerFailure as exc:
                    failure = exc
                finally:
                    durations["run"] = round(durations.get("run", 0.0) + time.perf_counter() - started, 3)
            # Killed at the host-memory limit in the judge's own code (judge.memory): the judge's failure,
            # retried once (a fresh worker) with the smaller plan, as the judge's own out-of-memory errors.
            if assemble.judges_memory(failure) and not request.memory_retry:
                first, request.memory_retry = failure.detail, True
                continue
            report = assemble.worker_failure(failure, failure.stage or "load")
            if first is not None and report["status"] == JUDGE_ERROR:
                report["error"] += f"; the same with the smaller memory plan (first attempt: {first})"
            return report
        payload = reply.payload
        if not isinstance(payload, dict):
            return assemble.judge_error("load", f"the run worker replied with a {type(payload).__name__}")
        if isinstance(payload.get("phases_s"), dict):
            durations["run_phases"] = payload.pop("phases_s")
        _lock_durations(payload.pop("gpu_lock_s", None), durations)
        if payload.get("harness_error"):  # an exception in the worker outside the harness's own handling
            trace = str(payload["harness_error"])
            return assemble.judge_error("load", trace.strip().splitlines()[-1][:500], trace)
        if first is not None:
            text = f"the first attempt was killed in the judge's code ({first}): judged with the smaller plan"
            payload.setdefault("messages", []).append(message("note", text))
        if reply.fatal and not payload.get("device_error"):
            payload.setdefault("messages", []).append(
                message("note", "the candidate tampered with the worker process; the worker was replaced")
            )
        elif reply.fatal:
            payload.setdefault("messages", []).append(
                message(
                    "note",
                    f"the device was left unusable ({payload.get('device_error')}); the worker was replaced",
                )
            )
            if payload.get("status") == "correct":  # an asynchronous fault surfaced only after the verdict
                payload.update(
                    status=RUNTIME_ERROR, error=f"device error after the run: {payload['device_error']}"
                )
        return payload

    def _prefetch_baselines(self, ref: Source, settings: dict[str, Any]) -> None:
        """Start the reference's baselines on the run worker while the candidate compiles on a CPU worker,
        so a cold baseline no longer adds to the verdict's latency (the verdict then finds it in memory).
        Only on a GPU (CPU mode measures eager alone, and a CUDA candidate is not run there). A failure here
        is left to the verdict's own call, which raises it."""
        key = self._baseline_key(ref, settings)
        if self.device != "cuda" or not settings.get("time_candidate") or not settings.get("baselines"):
            return
        with self._lock:
            if key in self._baselines or key in self._prefetching:
                return
            self._prefetching.add(key)

        def fetch() -> None:
            try:
                with contextlib.suppress(Exception):  # reported by the verdict's own call
                    self._get_baselines(ref, settings)
            finally:
                with self._lock:
                    self._prefetching.discard(key)

        threading.Thread(target=fetch, name="kernels_env-baselines", daemon=True).start()

    @staticmethod
    def _baseline_key(ref: Source, settings: dict[str, Any]) -> tuple:
        modes = tuple(settings["baselines"])
        return (source_hash(ref), modes, settings["allow_tf32"], settings["mode"], repr(settings["timing"]))

    def _get_baselines(self, ref: Source, settings: dict[str, Any]) -> dict[str, Any]:
        modes = tuple(settings["baselines"])
        key = self._baseline_key(ref, settings)
        with self._lock:
            lock = self._baseline_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._baselines:
                return self._baselines[key]
            request_id = uuid.uuid4().hex[:12]
            request = BaselineRequest(
                id=request_id,
                reference=ref,
                modes=list(modes),
                judge=settings,
                cache_dir=str(self.cache_dir),
                workdir=str(self._fleet.tmp / f"base-{request_id}"),
            )
            try:
                with self._fleet.run.acquire() as worker:
                    started = time.perf_counter()  # the worker's time, not the wait for one
                    reply = worker.call(request, self.config.baseline_timeout_s)
            except WorkerFailure as exc:  # only the reference ran: a hang or crash while timing it is its own
                if exc.kind in ("protocol", "forgery"):
                    raise JudgeFailure(f"baselines of {ref.name}: {exc.detail}") from None
                what = f"reference {ref.name}: {exc.detail} while its baselines were timed"
                raise BrokenReference(what) from None
            finally:
                shutil.rmtree(self._fleet.tmp / f"base-{request_id}", ignore_errors=True)
            payload = reply.payload
            if payload.get("problem_error"):
                raise BrokenReference(f"baselines of {ref.name}: {payload['problem_error']}")
            if payload.get("harness_error") or not isinstance(payload.get("baselines"), dict):
                detail = str(payload.get("harness_error") or "a reply without baselines").strip()
                raise JudgeFailure(f"baselines of {ref.name}: the judge failed: {detail.splitlines()[-1]}")
            out = {"baselines": payload["baselines"], "comparable": payload.get("comparable") is True}
            self._baselines[key] = out
            lock: dict[str, float] = {}
            _lock_durations(payload.get("gpu_lock_s"), lock)
            with self._lock:
                self._baseline_seconds.append(time.perf_counter() - started)
                if lock:
                    self._baseline_gpu_wait.append(lock["gpu_wait"])
            return out

    def baseline_seconds(self) -> list[float]:
        """Seconds a run worker spent on each reference's baselines measured by this client (cached ones
        cost none): with the candidates' ``durations_s.run``, what kept the run workers busy."""
        with self._lock:
            return list(self._baseline_seconds)

    def baseline_gpu_wait(self) -> list[float]:
        """Of ``baseline_seconds``, the seconds each waited for the GPU lock (empty without a lock)."""
        with self._lock:
            return list(self._baseline_gpu_wait)


def _lock_durations(lock: Any, durations: dict[str, Any]) -> None:
    """The run worker's seconds waiting for its GPU's lock and holding it exclusive (shared GPUs under
    exclusive timing only) as ``durations_s.gpu_wait`` / ``gpu_exclusive``, added over attempts."""
    if not isinstance(lock, dict):
        return
    for key, name in (("wait", "gpu_wait"), ("exclusive", "gpu_exclusive")):
        value = lock.get(key)
        if isinstance(value, int | float):
            durations[name] = round(durations.get(name, 0.0) + float(value), 4)


def _screen_compile(report: Any) -> dict[str, Any]:
    """The compile stage's report, what is not the candidate's doing first: a broken reference or the judge's
    own failure (both reported before candidate code ran), then a status it may not report (forged)."""
    if not isinstance(report, dict):
        return assemble.judge_error("compile", f"the compile worker replied with a {type(report).__name__}")
    if report.get("problem_error"):
        return {"problem_error": report["problem_error"], "stage": "compile"}
    if report.get("judge_error"):
        return assemble.judge_error("compile", str(report["judge_error"]), str(report.get("traceback", "")))
    if report.get("toolchain_missing"):  # said by the compile worker before any candidate code ran
        return assemble.toolchain_missing(report["toolchain_missing"], report.get("backends"))
    if report.get("status") not in assemble.COMPILE_STATUSES:
        return assemble.forged("compile", f"the compile stage reported status {report.get('status')!r}")
    return report
