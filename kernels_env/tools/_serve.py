"""Tool requests (``protocol.ToolRequest``) inside the sandbox's workers.

The worker writes the request's reference and solution under its ``workdir`` (``loader.materialize``: the
agent's files are never touched, whatever the candidate does), runs the tool and renames the temporary paths
in the response back to the names the agent knows. Two hosts:

- ``serve_in_process`` (the GPU/run worker: profile, sanitize, Triton compile reports): the tool runs in the
  worker itself, exactly like an evaluation; a hang, crash, memory overrun or broken device kills and
  replaces the worker (``kernels_env.runtime.supervisor``), the health check runs afterwards as for every
  request.
- ``serve_forked`` (the compile workers: compile, roofline; GPU hidden): the tool runs in a forked child
  killed with everything it started at ``time_s`` + a grace period (``compile_stage.run_forked``).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..judge.build.errors import LoadError
from ..judge.build.loader import materialize
from ..rules.messages import ToolRequest
from ._context import ToolError, ToolLimits
from ._registry import error_response, run_tool


def grace_s(time_s: float) -> float:
    """Time a host gives a tool past its own limit to report (its subprocesses already stop at the limit)."""
    return min(15.0, 2.0 + 0.1 * time_s)


def _prepare(req: ToolRequest) -> tuple[dict[str, Any], dict[str, str]]:
    """The tool's arguments with the materialised paths, and {temporary prefix: the agent's name}."""
    workdir = Path(req.workdir)
    args = {k: v for k, v in req.args.items() if k not in ("reference", "solution")}
    aliases: dict[str, str] = {}
    for what, source in (("reference", req.reference), ("solution", req.solution)):
        if source is None:
            continue
        entry = materialize(source, workdir / what)
        args[what] = str(entry.parent if source.files is not None else entry)
        aliases[str(workdir / what) + os.sep] = ""
        aliases[str(workdir / what)] = "."  # after the longer prefix (dicts keep insertion order)
    return args, aliases


def _unalias(value: Any, aliases: dict[str, str]) -> Any:
    if isinstance(value, str):
        for prefix, name in aliases.items():
            value = value.replace(prefix, name)
        return value
    if isinstance(value, dict):
        return {k: _unalias(v, aliases) for k, v in value.items()}
    if isinstance(value, list):
        return [_unalias(v, aliases) for v in value]
    return value


def _run(req: ToolRequest) -> dict[str, Any]:
    try:
        args, aliases = _prepare(req)
    except (LoadError, OSError) as exc:
        return error_response(req.tool, f"cannot write the sources: {exc}")
    return _unalias(run_tool(req.tool, args, req.limits), aliases)


def serve_in_process(req: ToolRequest, progress: Callable[[str, str], None]) -> dict[str, Any]:
    """In a run worker (its stdout already goes to stderr; the worker cleans up after the request)."""
    from ..judge.run.harness import request_env  # imports torch: a compile worker's tool child never does

    Path(req.workdir).mkdir(parents=True, exist_ok=True)
    progress("tool", req.tool)
    with request_env(req.env):
        return _run(req)


def serve_forked(req: ToolRequest) -> dict[str, Any]:
    """In a compile worker: a forked child, killed with its subprocesses at the time limit (+ grace)."""
    from ..judge.build.compile_stage import run_forked  # imports the guard, and so torch

    try:
        limits = ToolLimits.from_dict(req.limits, req.tool)
    except ToolError as exc:
        return error_response(req.tool, str(exc))
    workdir = Path(req.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    def child() -> dict[str, Any]:
        os.environ.update(req.env)
        return _run(req)

    def failed(exc: BaseException) -> dict[str, Any]:
        resp = error_response(req.tool, f"{type(exc).__name__}: {exc}")
        resp["traceback"] = traceback.format_exc()[-3000:]
        return resp

    run = run_forked(
        lambda emit: child(), failed, limits.time_s + grace_s(limits.time_s), workdir / "tool.log"
    )
    if run.timed_out:
        return killed_response(req.tool, limits.time_s, run.duration_s, run.log_tail)
    if run.report is None:
        resp = error_response(req.tool, f"the tool's process died ({run.exit}) without a response")
        resp["log_tail"] = run.log_tail[-2000:]
        return resp
    return run.report


def killed_response(tool: str, time_s: float, elapsed_s: float, log_tail: str = "") -> dict[str, Any]:
    resp = error_response(tool, f"time limit of {time_s:g} s exceeded: the tool's process was killed")
    resp["elapsed_s"] = round(elapsed_s, 3)
    resp["killed"] = True
    if log_tail:
        resp["log_tail"] = log_tail[-2000:]
    return resp
