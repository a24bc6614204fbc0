"""The sandbox client: the one way callers (research/, benchmarks, the CLI) judge candidates.

    from kernels_env.client import SandboxClient
    from kernels_env.config import SandboxConfig, JudgeConfig
    with SandboxClient(SandboxConfig(device="auto")) as sb:
        res = sb.evaluate(reference=REF, solution=SOL, judge=JudgeConfig())  # the result (docs/sandbox.md)
        base = sb.baseline(reference=REF)  # eager / compile / max-autotune timings
        prof = sb.tool("profile", {"reference": REF, "solution": SOL})  # diagnostics (docs/tools.md)

Candidates never run in this process: a compile stage imports them on CPU worker processes with the GPU
hidden (every kernel build is cached there), then a run worker on the device checks correctness and times
them. ``submit`` returns a future so many candidates can be in flight; the client is thread-safe.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from . import devices
from .config import JudgeConfig, SandboxConfig, TimingConfig
from .presets import resolve
from .protocol import BaselineRequest, CompileRequest, EvaluateRequest, Source
from .result import COMPILE_ERROR, NOT_RUN, REJECTED, RUNTIME_ERROR, TIMEOUT, message, new_result
from .rewards import get_reward
from .sources import display_stem, read_source, source_hash
from .supervisor import BrokenReference, SandboxError, Worker, WorkerFailure, WorkerPool

# The config dataclasses are part of the client API (research may import only client/protocol).
__all__ = ["BrokenReference", "JudgeConfig", "SandboxClient", "SandboxConfig", "SandboxError", "TimingConfig"]

MIN_CANDIDATE_MS = 1e-4  # floor for speedups: a measured 0 never divides
# What a compile stage may report (its child runs candidate code and writes the report: the rest is forged).
COMPILE_STATUSES = ("ok", COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, REJECTED)
PROTOCOL_FORGERY = "protocol_forgery"
SPEEDUP_REVIEW_THRESHOLD = 10.0  # speedups beyond this are flagged for review in the result (catalogue #16)


class SandboxClient:
    def __init__(self, config: SandboxConfig | None = None, judge: JudgeConfig | None = None):
        self.config = config or SandboxConfig()
        self.default_judge = judge or JudgeConfig()
        self.cache_dir = Path(os.path.expanduser(self.config.cache_dir)).resolve()
        self.device: str | None = None
        self._run: WorkerPool | None = None
        self._compile: WorkerPool | None = None
        self._tmp: Path | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._baseline_locks: dict[tuple, threading.Lock] = {}
        self._baselines: dict[tuple, dict[str, Any]] = {}
        self.cuda_arch = ""

    # lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> SandboxClient:
        return self  # workers start on first use (or with an explicit ``start()``)

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        with self._lock:
            if self._run is not None:
                return
            self.device, gpus = devices.resolve(self.config.device)
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            self._tmp = Path(tempfile.mkdtemp(prefix="kernels_env-"))
            atexit.register(self.close)
            limit = int(self.config.memory_limit_gb * 2**30)
            common = {"TRITON_CACHE_DIR": str(self.cache_dir / "triton"), **self._cache_env()}
            if self.device == "cuda":
                # at most one run worker per GPU: two would disturb each other's timings
                count = min(self.config.num_gpu_workers or len(gpus), len(gpus))
                run_envs = [{**common, "CUDA_VISIBLE_DEVICES": gpus[i]} for i in range(count)]
            else:
                run_envs = [{**common, "CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"}]
            run_envs = [{**env, "KERNELS_ENV_BUILD_ONLY": "0"} for env in run_envs]
            compile_env = {**common, "CUDA_VISIBLE_DEVICES": "", "KERNELS_ENV_BUILD_ONLY": "1"}

            def worker(role: str, device: str, env: dict[str, str], name: str) -> Worker:
                return Worker(role, device, env, self._tmp, name, limit, self.config.startup_timeout_s)

            runs = [worker("run", self.device, env, f"run{i}") for i, env in enumerate(run_envs)]
            compiles = [
                worker("compile", "cpu", compile_env, f"compile{i}")
                for i in range(max(1, self.config.num_compile_workers))
            ]
            standbys = [worker("run", self.device, env, f"run{i}-standby") for i, env in enumerate(run_envs)]
            standbys = standbys if self.config.standby_run_workers else []
            self._run = WorkerPool(runs, self.config.max_requests_per_worker, standbys)
            self._compile = WorkerPool(compiles)
            failures: list[BaseException] = []

            def boot(pool: WorkerPool) -> None:
                try:
                    pool.start()
                except BaseException as exc:  # re-raised below in the caller's thread
                    failures.append(exc)

            threads = [
                threading.Thread(target=boot, args=(p,), daemon=True) for p in (self._run, self._compile)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if failures:
                self._shutdown()
                raise failures[0]
            self.cuda_arch = self._arch()
            workers = len(runs) + len(compiles) + 2
            self._executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="kernels_env")

    def _arch(self) -> str:
        if self.config.cuda_arch != "auto":
            return self.config.cuda_arch
        envs = self._run.environments() if self._run else []
        return next((e["compute_capability"] for e in envs if e.get("compute_capability")), "9.0")

    def close(self) -> None:
        with self._lock:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        pools = [p for p in (self._run, self._compile) if p is not None]
        closers = [threading.Thread(target=p.close, daemon=True) for p in pools]
        for t in closers:
            t.start()
        for t in closers:
            t.join()
        self._run = self._compile = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    @property
    def environment(self) -> dict[str, Any]:
        self.start()
        envs = self._run.environments()
        return envs[0] if envs else {}

    # public API ------------------------------------------------------------------------------------------
    def evaluate(self, reference: Any, solution: Any, judge: JudgeConfig | None = None, **names: str) -> dict:
        """Judge a solution (path, source text or workspace directory) against a reference: the result."""
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
        settings = resolve(judge or self.default_judge, self.device)
        names = {"problem": problem or display_stem(ref), "solution": solution_name or sol.name}
        return self._executor.submit(self._evaluate, ref, sol, settings, names)

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
        resp = self._tool(name, args, lim, ref, sol, started)
        resp.pop("duration_s", None)
        resp["elapsed_s"] = round(time.perf_counter() - started, 3)
        from .tools._registry import fit_response

        return fit_response(resp, lim.max_output_bytes)

    def _tool(self, name, args, lim, ref, sol, started) -> dict[str, Any]:
        from .build import detect_backends
        from .protocol import ToolRequest
        from .tools import error_response
        from .tools._serve import grace_s, killed_response

        texts = ([sol.text] if sol.text is not None else list((sol.files or {}).values())) if sol else []
        backends = set(detect_backends(texts, []))
        gpu = name in ("profile", "sanitize") or (
            name == "compile" and self.device == "cuda" and "triton" in backends
        )
        args["cache_dir"] = str(self.cache_dir)  # the tools' own cache (measured roofline ceilings)
        if name == "roofline" and self.device == "cuda":
            args.setdefault("device_name", self.environment.get("gpu"))
        env = (
            self._request_env(sol) if sol else {**self._cache_env(), "KERNELS_ENV_CUDA_ARCH": self.cuda_arch}
        )
        request_id = uuid.uuid4().hex[:12]
        workdir = self._tmp / f"tool-{request_id}"
        try:
            if (
                gpu
                and ref is not None
                and sol is not None
                and backends & {"fastpath", "load_inline", "cpp_extension"}
            ):
                # Build on a compile worker first (cached), so the GPU worker never waits on a compiler.
                budget = min(self.config.compile_timeout_s, lim.time_s)
                build = CompileRequest(
                    id=request_id,
                    reference=ref,
                    solution=sol,
                    workdir=str(workdir),
                    timeout_s=budget,
                    env=env,
                )
                try:
                    with self._compile.acquire() as worker:
                        report = worker.call(build, budget + 60).payload
                except WorkerFailure as exc:
                    return _tool_failure(name, exc, lim.time_s, time.perf_counter() - started)
                if report.get("status") != "ok":
                    return _build_failed(name, report)
            left = lim.time_s - (time.perf_counter() - started)
            if left < 1.0:
                return killed_response(name, lim.time_s, time.perf_counter() - started)
            request = ToolRequest(
                id=request_id,
                tool=name,
                args=args,
                limits={"time_s": left, "max_output_bytes": lim.max_output_bytes},
                workdir=str(workdir),
                reference=ref,
                solution=sol,
                env=env,
            )
            pool = self._run if gpu else self._compile
            try:
                with pool.acquire() as worker:
                    reply = worker.call(request, left + grace_s(left) + (0 if gpu else 30))
            except WorkerFailure as exc:
                return _tool_failure(name, exc, lim.time_s, time.perf_counter() - started)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        resp = reply.payload
        if resp.get("killed"):  # the host's limit was what was left of the caller's: report the caller's
            return killed_response(name, lim.time_s, time.perf_counter() - started, resp.get("log_tail", ""))
        if resp.get("harness_error"):
            raise SandboxError(
                f"the {'run' if gpu else 'compile'} worker failed on its own: {resp['harness_error']}"
            )
        if reply.fatal:
            resp.setdefault("warnings", []).append(
                f"the device was left unusable ({resp.get('device_error')}); the worker was replaced"
            )
        return resp if "tool" in resp else {**error_response(name, "malformed tool response"), "raw": resp}

    def baseline(self, reference: Any, judge: JudgeConfig | None = None) -> dict[str, Any]:
        """Timings of the reference in each of the judge's baseline modes (disk-cached)."""
        ref = read_source(reference, "reference")
        resolve(judge or self.default_judge, "cpu")
        self.start()
        settings = resolve(judge or self.default_judge, self.device)
        out = self._get_baselines(ref, settings)
        return {"problem": display_stem(ref), "device": self.device, **out}

    # internals -------------------------------------------------------------------------------------------
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
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:12]
        workdir = self._tmp / f"req-{request_id}"
        durations: dict[str, float] = {}
        env = self._request_env(sol)
        try:
            report = self._compile_stage(request_id, ref, sol, workdir, env, durations)
            if report.get("status") not in COMPILE_STATUSES:
                report = _forged("compile", f"the compile stage reported status {report.get('status')!r}")
            if report.get("status") == "ok" and not (self.device == "cpu" and report.get("needs_cuda")):
                report = {
                    **self._run_stage(request_id, ref, sol, workdir, env, settings, durations),
                    "backends": report.get("backends", []),
                }
            elif report.get("status") == "ok":
                report = {
                    "status": NOT_RUN,
                    "stage": "compile",
                    "guard_enforced": report.get("guard_enforced", False),
                    "backends": report.get("backends", []),
                    "messages": [
                        message(
                            "note",
                            "CPU mode: the solution's CUDA code compiled; it needs a "
                            "GPU to run, so it has no correctness verdict and no reward",
                        )
                    ],
                }
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if report.get("problem_error"):
            raise BrokenReference(f"{names['problem']}: {report['problem_error']}")
        result = new_result(
            status=report["status"],
            stage=report.get("stage", "compile"),
            problem=names["problem"],
            solution=names["solution"],
            request_id=request_id,
            error=report.get("error"),
            messages=report.get("messages"),
            check=report.get("check"),
            evidence=report.get("evidence"),
        )
        result["backends"] = report.get("backends", [])
        result["correctness"] = report.get("correctness")
        result["environment"] = self.environment
        result["judge"] = {**settings, "guard_enforced": bool(report.get("guard_enforced", False))}
        candidate = (report.get("timings") or {}).get("candidate")
        if candidate is not None:
            t0 = time.perf_counter()
            base = self._get_baselines(ref, settings)
            durations["baselines"] = round(time.perf_counter() - t0, 3)
            result["timings"] = {
                "comparable": base["comparable"],
                "unit": "ms",
                "candidate": candidate,
                "baselines": base["baselines"],
            }
            result["speedups"] = speedups(candidate, base["baselines"], base["comparable"])
            result["timings"]["review"], notes = speed_review(result["speedups"], candidate)
            result["messages"].extend(notes)
        result["reward_fn"] = settings["reward"]
        result["reward"] = get_reward(settings["reward"])(result["status"], result["speedups"])
        durations["total"] = round(time.perf_counter() - started, 3)
        result["durations_s"] = durations
        return result

    def _compile_stage(self, request_id, ref, sol, workdir, env, durations) -> dict[str, Any]:
        timeout = self.config.compile_timeout_s
        request = CompileRequest(
            id=request_id, reference=ref, solution=sol, workdir=str(workdir), timeout_s=timeout, env=env
        )
        waited = time.perf_counter()
        with self._compile.acquire() as worker:
            started = time.perf_counter()
            durations["queued"] = round(started - waited, 3)
            try:
                return worker.call(request, timeout + 60).payload
            except WorkerFailure as exc:
                return _failure(exc, "compile", timeout)
            finally:
                durations["compile"] = round(time.perf_counter() - started, 3)

    def _run_stage(self, request_id, ref, sol, workdir, env, settings, durations) -> dict[str, Any]:
        request = EvaluateRequest(
            id=request_id, reference=ref, solution=sol, workdir=str(workdir), judge=settings, env=env
        )
        waited = time.perf_counter()
        with self._run.acquire() as worker:
            started = time.perf_counter()
            durations["queued"] = round(durations.get("queued", 0.0) + started - waited, 3)
            try:
                reply = worker.call(request, self.config.run_timeout_s)
            except WorkerFailure as exc:
                return _failure(exc, exc.stage or "load", self.config.run_timeout_s)
            finally:
                durations["run"] = round(time.perf_counter() - started, 3)
        payload = reply.payload
        if isinstance(payload.get("phases_s"), dict):
            durations["run_phases"] = payload.pop("phases_s")
        if payload.get("harness_error"):
            raise SandboxError(f"the run worker failed on its own: {payload['harness_error']}")
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

    def _get_baselines(self, ref: Source, settings: dict[str, Any]) -> dict[str, Any]:
        modes = tuple(settings["baselines"])
        key = (source_hash(ref), modes, settings["allow_tf32"], settings["mode"], repr(settings["timing"]))
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
                workdir=str(self._tmp / f"base-{request_id}"),
            )
            try:
                with self._run.acquire() as worker:
                    reply = worker.call(request, self.config.baseline_timeout_s)
            except WorkerFailure as exc:
                raise SandboxError(
                    f"baselines of {ref.name}: {exc.detail} (stage {exc.stage})\n{exc.log_tail}"
                ) from None
            finally:
                shutil.rmtree(self._tmp / f"base-{request_id}", ignore_errors=True)
            payload = reply.payload
            if payload.get("problem_error") or payload.get("harness_error"):
                raise SandboxError(
                    f"baselines of {ref.name}: {payload.get('problem_error') or payload['harness_error']}"
                )
            out = {"baselines": payload["baselines"], "comparable": payload["comparable"]}
            self._baselines[key] = out
            return out


def speed_review(speedups: dict[str, float | None], candidate: dict) -> tuple[dict[str, Any], list[dict]]:
    """Speedups beyond ``SPEEDUP_REVIEW_THRESHOLD`` are legal but flagged for review (catalogue #16: one
    absurd entry must not carry a geomean); the roofline floor the worker checked is reported next to them."""
    flagged = sorted(m for m, x in speedups.items() if x is not None and x > SPEEDUP_REVIEW_THRESHOLD)
    review = {
        "speedup_threshold": SPEEDUP_REVIEW_THRESHOLD,
        "flagged": flagged,
        "roofline_floor_ms": candidate.get("roofline_floor_ms"),
    }
    notes = [
        message(
            "note",
            f"speedup over {m} is {speedups[m]:.1f}x (> {SPEEDUP_REVIEW_THRESHOLD:g}x): flagged for review",
            baseline=m,
            speedup=speedups[m],
        )
        for m in flagged
    ]
    return review, notes


def speedups(candidate: dict, baselines: dict[str, dict], comparable: bool) -> dict[str, float | None]:
    """t_baseline / t_candidate per baseline mode (medians); None when not comparable or not measured."""
    out: dict[str, float | None] = {}
    for mode, base in baselines.items():
        t0 = base.get("median_ms")
        out[mode] = t0 / max(candidate["median_ms"], MIN_CANDIDATE_MS) if comparable and t0 else None
    return out


def _tool_failure(name: str, exc: WorkerFailure, time_s: float, elapsed_s: float) -> dict[str, Any]:
    """The response when the worker hosting a tool was killed (time, memory, output) or died."""
    from .tools import error_response
    from .tools._serve import killed_response

    if exc.kind == "timeout":
        return killed_response(name, time_s, elapsed_s, exc.log_tail)
    what = {"crash": "the tool's process crashed", "memory": "killed", "output": "killed"}.get(
        exc.kind, "failed"
    )
    resp = error_response(name, f"{what}: {exc.detail}")
    if exc.log_tail:
        resp["log_tail"] = exc.log_tail[-2000:]
    return resp


def _build_failed(name: str, report: dict[str, Any]) -> dict[str, Any]:
    """The response when the compile stage before a GPU tool found the candidate does not build."""
    from .tools import error_response

    if report.get("problem_error"):
        return error_response(name, f"the reference cannot be used: {report['problem_error']}")
    resp = error_response(
        name, f"the candidate does not build ({report.get('status')}): {report.get('error')}"
    )
    compiler = [m for m in report.get("messages", []) if m.get("kind") == "compiler"]
    resp["diagnostics"] = [
        {k: m.get(k) for k in ("file", "line", "column", "severity", "message")} for m in compiler
    ]
    hint = "  (the compile tool maps these to the lines of your files)"
    resp["text"] = "\n".join([resp["text"], *("  " + m["text"] for m in compiler[1:10]), hint])
    return resp


def _forged(stage: str, error: str, evidence: dict | None = None) -> dict[str, Any]:
    return {
        "status": REJECTED,
        "stage": stage,
        "error": f"policy check {PROTOCOL_FORGERY!r} failed: {error}",
        "check": PROTOCOL_FORGERY,
        "evidence": evidence or {"what": error},
        "messages": [],
        "guard_enforced": True,
    }


def _failure(exc: WorkerFailure, stage: str, limit: float) -> dict[str, Any]:
    """The verdict when a worker died, hung or misbehaved (every stage runs candidates under the guard)."""
    tail = [message("log", exc.log_tail)] if exc.log_tail else []
    if exc.kind == "forgery":  # candidate code wrote to the protocol channel
        return {**_forged(stage, exc.detail, exc.evidence), "messages": tail}
    if exc.kind == "timeout":
        return {
            "status": TIMEOUT,
            "stage": stage,
            "error": f"{stage} stage {exc.detail} (worker killed)",
            "messages": tail,
            "guard_enforced": True,
        }
    return {
        "status": RUNTIME_ERROR,
        "stage": stage,
        "error": f"{exc.detail} (during {stage})",
        "messages": tail,
        "guard_enforced": True,
    }
