"""The diagnostic tools as a client runs them (``kernels_env.tools``, docs/tools.md): a caller's tool call,
and the two a verdict uses: the roofline (the task's speed-of-light floor, once per reference) and the
sanitizer's racecheck (``kernels_env.judge.assemble.race_probe``)."""

from __future__ import annotations

import threading
import time
from typing import Any

from ..judge.assemble import race_probe
from ..judge.build.sources import read_source, source_hash
from ..rules import speed_of_light
from ..rules.messages import Source
from ..runtime.tool_host import call_tool
from ..tools import TOOLS, ToolError, ToolLimits, error_response
from ..tools._registry import fit_response
from ._sandbox import Sandbox


class Tools:
    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._rooflines: dict[str, dict[str, Any]] = {}  # reference hash -> the roofline tool's result

    def check(self, name: str, args: Any, limits: dict | None) -> tuple[ToolLimits, dict, Any, Any]:
        """A tool call's limits, its other arguments and its sources, read in the caller's thread; raises
        ``ToolError`` with the response's error text for a bad call."""
        if name not in TOOLS:
            raise ToolError(f"unknown tool {name!r}; available: {sorted(TOOLS)}")
        if args is not None and not isinstance(args, dict):
            raise ToolError("args must be a JSON object")
        lim = ToolLimits.from_dict(limits, name)
        args = dict(args or {})
        try:
            ref = read_source(args.pop("reference"), "reference") if args.get("reference") else None
            sol = (
                read_source(args.pop("solution"), "solution", allow_workspace=True)
                if args.get("solution")
                else None
            )
        except (OSError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return lim, args, ref, sol

    def call(self, name: str, lim: ToolLimits, args: dict, ref, sol, started: float) -> dict:
        """Run a checked call (``check``) on the workers of a started fleet."""
        sandbox = self.sandbox
        args["cache_dir"] = str(sandbox.cache_dir)  # the tools' own cache (measured roofline ceilings)
        if name == "roofline" and sandbox.device == "cuda":
            args.setdefault("device_name", sandbox.fleet.environment().get("gpu"))
        env = sandbox.request_env(sol) if sol else sandbox.tool_env()
        resp = call_tool(sandbox.fleet, name, args, lim, ref, sol, env, started)
        resp.pop("duration_s", None)
        resp["elapsed_s"] = round(time.perf_counter() - started, 3)
        return fit_response(resp, lim.max_output_bytes)

    @staticmethod
    def error(name: str, text: str) -> dict[str, Any]:
        return error_response(name, text)

    def speed_of_light(self, ref: Source, candidate: dict[str, Any]) -> dict[str, Any]:
        """The task's roofline floor on this GPU (the ``roofline`` tool, once per reference) and the
        candidate's achieved fraction of it (``kernels_env.rules.speed_of_light``); n/a in CPU mode."""
        sandbox = self.sandbox
        if sandbox.device != "cuda":
            return speed_of_light.record(None, None, sandbox.device)
        key = source_hash(ref)
        roof = self._rooflines.get(key)
        if roof is None:
            gpu = sandbox.fleet.environment().get("gpu")
            args = {"cache_dir": str(sandbox.cache_dir), "device_name": gpu}
            lim = ToolLimits.from_dict(None, "roofline")
            env, started = sandbox.tool_env(), time.perf_counter()
            resp = call_tool(sandbox.fleet, "roofline", args, lim, ref, None, env, started)
            roof = resp.get("result") or {"note": resp.get("error") or "the roofline tool gave no result"}
            if resp.get("ok"):
                with self._lock:
                    self._rooflines[key] = roof
        return speed_of_light.record(roof, candidate.get("median_ms"), sandbox.device)

    def race_probe(self, ref: Source, sol: Source) -> dict[str, Any]:
        """The sanitize tool's racecheck on this candidate (kernels_env.judge.assemble.race_probe): its
        response."""
        sandbox = self.sandbox
        args = {"tools": [race_probe.TOOL], "cache_dir": str(sandbox.cache_dir)}
        lim = ToolLimits.from_dict(None, "sanitize")
        env = sandbox.request_env(sol)
        return call_tool(sandbox.fleet, "sanitize", args, lim, ref, sol, env, time.perf_counter())
