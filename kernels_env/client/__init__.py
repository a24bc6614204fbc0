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

This module is the facade: the request's stages are driven by ``_pipeline`` (compile stage, run stage and
its memory retry, the verdict), the reference's baselines kept by ``_baselines``, the tools run by
``_tools``, and what they share (config, cache, fleet) is ``_sandbox``; the verdict itself is assembled
from each stage's reply by ``kernels_env.judge.assemble``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

from ..judge.build.sources import display_stem, input_hashes, read_source
from ..rules._registry import Registry
from ..rules.config import JudgeConfig, SandboxConfig, TimingConfig
from ..rules.messages import Source
from ..rules.protocols import resolve
from ..rules.result import (
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
)
from ..rules.results_file import VerdictProgress, append_line, read_results, resume_results
from ..rules.rewards import REWARDS, get_reward
from ..rules.summary import format_pass_rate, problem_set, read_batch_summary, summarize
from ..runtime.backends import make_fleet
from ..runtime.errors import BrokenReference, SandboxError
from ..tools import ToolError
from ._baselines import Baselines
from ._pipeline import Pipeline
from ._sandbox import Sandbox
from ._tools import Tools

# The config dataclasses, the project's one Registry type (research registers its own things in it), the
# reward registry, the result schema and its one status vocabulary (with the
# verdicts made outside the judge: ``Result.outside``), the KernelBench-style summary of many verdicts (and
# the batch summary a results file has beside it, with its problem set) and the resumable results file
# (keyed by name and input hashes) are part of the client API (research may import only the client,
# rules.messages and session). The whole status vocabulary is exported, also statuses no caller names yet,
# so a caller compares a verdict's status with a name, never with a string spelled out.
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
        self._sandbox = Sandbox.of(self.config)
        self.cache_dir = self._sandbox.cache_dir
        env = self._sandbox.cache_env()
        self._sandbox.fleet = make_fleet(self.config, self.cache_dir, env)  # config.backend
        self._lock = threading.Lock()
        self._baselines = Baselines(self._sandbox)
        self._tools = Tools(self._sandbox)
        self._pipeline = Pipeline(self._sandbox, self._baselines, self._tools)

    @property
    def _fleet(self) -> Any:
        """The workers (``runtime.backends.make_fleet``), one object for every part of this client."""
        return self._sandbox.fleet

    @_fleet.setter
    def _fleet(self, fleet: Any) -> None:
        self._sandbox.fleet = fleet

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

    device = property(lambda self: self._sandbox.device, doc="The fleet's device (Sandbox.device).")
    cuda_arch = property(lambda self: self._sandbox.cuda_arch, doc="The fleet's GPU architecture.")

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
        settings = self._sandbox.settings(judge or self.default_judge)
        names = {"problem": problem or display_stem(ref), "solution": solution_name or sol.name}
        return self._fleet.executor.submit(self._pipeline.evaluate, ref, sol, settings, names)

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
        started = time.perf_counter()
        try:
            lim, args, ref, sol = self._tools.check(name, args, limits)
        except ToolError as exc:
            return self._tools.error(name, str(exc))
        self.start()
        return self._tools.call(name, lim, args, ref, sol, started)

    def baseline(self, reference: Any, judge: JudgeConfig | None = None) -> dict[str, Any]:
        """Timings of the reference in each of the judge's baseline modes (disk-cached)."""
        ref = read_source(reference, "reference")
        resolve(judge or self.default_judge, "cpu")
        self.start()
        out = self._baselines.get(ref, self._sandbox.settings(judge or self.default_judge))
        return {"problem": display_stem(ref), "device": self.device, **out}

    def baseline_seconds(self) -> list[float]:
        """Seconds a run worker spent on each reference's baselines measured by this client (cached ones
        cost none): with the candidates' ``durations_s.run``, what kept the run workers busy."""
        return self._baselines.seconds()

    def baseline_gpu_wait(self) -> list[float]:
        """Of ``baseline_seconds``, the seconds each waited for the GPU lock (empty without a lock)."""
        return self._baselines.gpu_wait()
