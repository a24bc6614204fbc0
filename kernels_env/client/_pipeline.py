"""One request through the stages, as the client drives it: the compile stage on a CPU worker, the run
stage on the device (retried once with the smaller memory plan when the judge's own code was killed at the
host-memory limit), then the verdict: baselines and speedups, the speed of light, the race probe, the
reward (``kernels_env.judge.assemble``).

Every request ends in a verdict; only ``SandboxError`` (the sandbox cannot work) escapes. A request still
queued when its client closed ends with that error: request threads never start workers (a restart from
here would outlive the client).
"""

from __future__ import annotations

import shutil
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from ..judge.assemble import race_probe, replies
from ..judge.assemble import result as assemble
from ..judge.build.diagnostics import exception_line, truncate
from ..rules.messages import CompileRequest, EvaluateRequest, Source
from ..rules.result import JUDGE_ERROR, REFERENCE_ERROR, message
from ..runtime.errors import BrokenReference, JudgeFailure, SandboxError, WorkerFailure
from ._baselines import Baselines
from ._sandbox import Sandbox
from ._tools import Tools


class Pipeline:
    def __init__(self, sandbox: Sandbox, baselines: Baselines, tools: Tools):
        self.sandbox, self.baselines, self.tools = sandbox, baselines, tools

    def evaluate(self, ref: Source, sol: Source, settings: dict[str, Any], names: dict[str, str]) -> dict:
        """The verdict of one request. Only ``SandboxError`` (the sandbox cannot work) escapes: anything else
        that goes wrong on this side is the judge's failure, a ``judge_error`` verdict."""
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:12]
        durations: dict[str, float] = {}
        try:
            result = self._judge(ref, sol, settings, names, request_id, durations)
        except JudgeFailure as exc:
            result = self.fallback(assemble.judge_error("done", str(exc)), settings, names, request_id)
        except SandboxError:
            raise
        except Exception as exc:  # noqa: BLE001 - the client's own failure while assembling the verdict
            report = assemble.judge_error("done", exception_line(exc), truncate(traceback.format_exc()))
            result = self.fallback(report, settings, names, request_id)
        durations["total"] = round(time.perf_counter() - started, 3)
        result["durations_s"] = durations
        return result

    def fallback(self, report: dict[str, Any], settings: dict[str, Any], names: dict[str, str], rid: str):
        """The judge_error verdict built from the schema alone: the assembly steps may be what failed."""
        try:
            # never the client's ``environment``: it would restart a closed fleet
            environment = self.sandbox.fleet.environment()
        except Exception:  # noqa: BLE001 - the verdict of a failure must not fail in turn
            environment = {}
        return replies.fallback(report, settings, names, rid, environment)

    def _judge(self, ref, sol, settings, names, request_id: str, durations: dict[str, float]) -> dict:
        fleet = self.sandbox.fleet
        if not fleet.started:  # closed before this request ran (found as a CPU load_inline_throughput hang)
            raise SandboxError("the sandbox client was closed before this request ran")
        workdir = fleet.tmp / f"req-{request_id}"
        env = self.sandbox.request_env(sol)
        self.baselines.prefetch(ref, settings)
        try:
            compiled = self._compile_stage(request_id, ref, sol, workdir, env, durations)
            report = replies.screen_compile(compiled)
            cpu_only = self.sandbox.device == "cpu" and report.get("needs_cuda")
            if report.get("status") == "ok" and not cpu_only:
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
        result = assemble.verdict(report, settings, names, request_id, fleet.environment())
        candidate = (report.get("timings") or {}).get("candidate")
        if candidate is not None:
            t0 = time.perf_counter()
            try:
                assemble.add_timings(result, candidate, self.baselines.get(ref, settings))
                assemble.note_shared_device(result, settings)
                result["timings"]["speed_of_light"] = self.tools.speed_of_light(ref, candidate)
            except (BrokenReference, JudgeFailure) as exc:  # judged, but no baseline: no speedup exists
                status = REFERENCE_ERROR if isinstance(exc, BrokenReference) else JUDGE_ERROR
                result.update(status=status, stage="timing", error=str(exc))
                note = "the candidate was judged; its baselines failed: no speedup and no reward"
                result["messages"].append(message("note", note))
            durations["baselines"] = round(time.perf_counter() - t0, 3)
        if race_probe.wants_probe(result, settings):
            t0 = time.perf_counter()
            race_probe.apply_probe(result, self.tools.race_probe(ref, sol))
            durations["race_probe"] = round(time.perf_counter() - t0, 3)
        assemble.add_reward(result, settings["reward"])
        return result

    def _compile_stage(self, request_id, ref, sol, workdir: Path, env, durations) -> Any:
        config = self.sandbox.config
        timeout = config.compile_timeout_s
        request = CompileRequest(
            id=request_id,
            reference=ref,
            solution=sol,
            workdir=str(workdir),
            timeout_s=timeout,
            env=env,
            import_timeout_s=min(config.import_timeout_s, timeout),
        )
        waited = time.perf_counter()
        with self.sandbox.fleet.compile.acquire() as worker:
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

    def _run_stage(self, request_id, ref, sol, workdir: Path, env, settings, durations) -> dict[str, Any]:
        request = EvaluateRequest(
            id=request_id, reference=ref, solution=sol, workdir=str(workdir), judge=settings, env=env
        )
        first: str | None = None
        while True:
            waited = time.perf_counter()
            with self.sandbox.fleet.run.acquire() as worker:
                started = time.perf_counter()
                durations["queued"] = round(durations.get("queued", 0.0) + started - waited, 3)
                try:
                    reply = worker.call(request, self.sandbox.config.run_timeout_s)
                    break
                except WorkerFailure as exc:
                    failure = exc
                finally:
                    durations["run"] = round(durations.get("run", 0.0) + time.perf_counter() - started, 3)
            # Killed at the host-memory limit in the judge's own code (judge.check.memory): the judge's
            # failure, retried once (a fresh worker) with the smaller plan, as the judge's own out-of-memory.
            if assemble.judges_memory(failure) and not request.memory_retry:
                first, request.memory_retry = failure.detail, True
                continue
            return replies.retried_failure(assemble.worker_failure(failure, failure.stage or "load"), first)
        return replies.run_reply(reply.payload, reply.fatal, durations, first)
