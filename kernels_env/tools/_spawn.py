"""Run a tool in a child process with a hard time limit and a bounded response (until the core's worker
dispatches ``tool`` requests, and for the CLI): the candidate's code never runs in the caller's process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._context import ToolLimits

GRACE_S = 15.0  # the tool's own deadline stops its subprocesses; this is for a wedged interpreter
_REPO_ROOT = str(Path(__file__).resolve().parents[2])


def run_tool_subprocess(
    name: str,
    args: dict | None = None,
    limits: dict | ToolLimits | None = None,
    *,
    python: str | None = None,
    env: dict | None = None,
    cwd: str | None = None,
    grace_s: float = GRACE_S,
) -> dict:
    lim = limits if isinstance(limits, ToolLimits) else ToolLimits.from_dict(limits, name)
    request = {
        "tool": name,
        "args": args or {},
        "limits": {"time_s": lim.time_s, "max_output_bytes": lim.max_output_bytes},
    }
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, child_env.get("PYTHONPATH", "")) if p)
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "kernels_env.tools.worker"],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            env=child_env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            proc.wait(timeout=lim.time_s + grace_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        elapsed = time.monotonic() - t0
        out.seek(0)
        raw = out.read(lim.max_output_bytes * 2 + 4096)
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 2000))
        err_tail = err.read().decode("utf-8", "replace")
    base = {
        "protocol": 1,
        "tool": name,
        "ok": False,
        "result": None,
        "text": "",
        "elapsed_s": round(elapsed, 3),
        "truncated": False,
    }
    if timed_out:
        return {
            **base,
            "error": f"time limit of {lim.time_s:.0f}s exceeded: tool process killed",
            "text": f"{name}: time limit of {lim.time_s:.0f}s exceeded",
        }
    try:
        resp = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return {
            **base,
            "error": f"tool process exited with code {proc.returncode} without a response",
            "text": f"{name}: tool process crashed (exit {proc.returncode})",
            "stderr_tail": err_tail,
        }
    resp["elapsed_s"] = round(elapsed, 3)
    return resp
