"""Where a diagnostic tool call runs: GPU tools (profile, sanitize, Triton compile reports on a GPU) on a run
worker after a compile worker built the candidate's kernels (cached), the others in a forked child of a
compile worker; and the responses when that worker was killed or the candidate does not build.
"""

from __future__ import annotations

import shutil
import time
import uuid
from typing import Any

from ..judge.build.backends import detect_backends
from ..rules.messages import CompileRequest, Source, ToolRequest
from ..tools import ToolLimits, error_response
from ..tools._serve import grace_s, killed_response
from .errors import WorkerFailure
from .fleet import Fleet

NATIVE_BUILDS = {"fastpath", "load_inline", "cpp_extension"}


def call_tool(
    fleet: Fleet,
    name: str,
    args: dict[str, Any],
    lim: ToolLimits,
    ref: Source | None,
    sol: Source | None,
    env: dict[str, str],
    started: float,
) -> dict[str, Any]:
    texts = ([sol.text] if sol.text is not None else list((sol.files or {}).values())) if sol else []
    backends = set(detect_backends(texts, []))
    gpu = name in ("profile", "sanitize") or (
        name == "compile" and fleet.device == "cuda" and "triton" in backends
    )
    request_id = uuid.uuid4().hex[:12]
    workdir = fleet.tmp / f"tool-{request_id}"
    try:
        if gpu and ref is not None and sol is not None and backends & NATIVE_BUILDS:
            # Build on a compile worker first (cached), so the GPU worker never waits on a compiler.
            budget = min(fleet.config.compile_timeout_s, lim.time_s)
            build = CompileRequest(
                id=request_id, reference=ref, solution=sol, workdir=str(workdir), timeout_s=budget, env=env
            )
            try:
                with fleet.compile.acquire() as worker:
                    report = worker.call(build, budget + 60).payload
            except WorkerFailure as exc:
                return tool_failure(name, exc, lim.time_s, time.perf_counter() - started)
            if report.get("status") != "ok":
                return build_failed(name, report)
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
        pool = fleet.run if gpu else fleet.compile
        try:
            with pool.acquire() as worker:
                reply = worker.call(request, left + grace_s(left) + (0 if gpu else 30))
        except WorkerFailure as exc:
            return tool_failure(name, exc, lim.time_s, time.perf_counter() - started)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    resp = reply.payload
    if resp.get("killed"):  # the host's limit was what was left of the caller's: report the caller's
        return killed_response(name, lim.time_s, time.perf_counter() - started, resp.get("log_tail", ""))
    if resp.get("harness_error"):  # the judge's own failure: a response that says so, never an exception
        worker = "run" if gpu else "compile"
        resp = error_response(name, f"the {worker} worker failed on its own (not the candidate's fault)")
        resp["traceback"] = str(reply.payload["harness_error"])[-3000:]
        return resp
    if reply.fatal:
        resp.setdefault("warnings", []).append(
            f"the device was left unusable ({resp.get('device_error')}); the worker was replaced"
        )
    return resp if "tool" in resp else {**error_response(name, "malformed tool response"), "raw": resp}


def tool_failure(name: str, exc: WorkerFailure, time_s: float, elapsed_s: float) -> dict[str, Any]:
    """The response when the worker hosting a tool was killed (time, memory, output) or died."""
    if exc.kind == "timeout":
        return killed_response(name, time_s, elapsed_s, exc.log_tail)
    what = {"crash": "the tool's process crashed", "memory": "killed", "output": "killed"}.get(
        exc.kind, "failed"
    )
    resp = error_response(name, f"{what}: {exc.detail}")
    if exc.log_tail:
        resp["log_tail"] = exc.log_tail[-2000:]
    return resp


def build_failed(name: str, report: dict[str, Any]) -> dict[str, Any]:
    """The response when the compile stage before a GPU tool found the candidate does not build."""
    if report.get("problem_error"):
        return error_response(name, f"the reference cannot be used: {report['problem_error']}")
    if report.get("judge_error"):
        return error_response(name, f"the judge failed building the candidate: {report['judge_error']}")
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
