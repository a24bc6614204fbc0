"""What every tool gets: a deadline, an output budget, a scratch directory, a bounded subprocess runner."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TIME_S = {"compile": 180.0, "profile": 120.0, "sanitize": 300.0, "roofline": 60.0}
DEFAULT_MAX_OUTPUT_BYTES = 64_000


class ToolError(Exception):
    """A failure the agent should read (bad arguments, missing profiler): reported, never a crash."""


@dataclass
class ToolLimits:
    time_s: float = 120.0
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES

    @classmethod
    def from_dict(cls, d: dict | None, tool: str = "") -> ToolLimits:
        d = dict(d or {})
        out = cls(
            time_s=float(d.pop("time_s", DEFAULT_TIME_S.get(tool, 120.0))),
            max_output_bytes=int(d.pop("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)),
        )
        if d:
            raise ToolError(f"unknown limit(s): {sorted(d)}; expected time_s, max_output_bytes")
        if out.time_s <= 0 or out.max_output_bytes < 512:
            raise ToolError("limits: time_s must be > 0 and max_output_bytes >= 512")
        return out


@dataclass
class ToolContext:
    limits: ToolLimits = field(default_factory=ToolLimits)
    started: float = field(default_factory=time.monotonic)
    scratch: Path | None = None

    def remaining(self) -> float:
        return self.limits.time_s - (time.monotonic() - self.started)

    def check_time(self, what: str) -> float:
        left = self.remaining()
        if left <= 1.0:
            raise ToolError(f"time limit of {self.limits.time_s:.0f}s reached before {what}")
        return left

    def tmpdir(self) -> Path:
        if self.scratch is None:
            self.scratch = Path(tempfile.mkdtemp(prefix="kernels_env_tool_"))
        return self.scratch

    def cleanup(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


@dataclass
class CmdResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    elapsed_s: float


def run_cmd(cmd: list[str], timeout_s: float, *, cwd=None, env=None, max_bytes: int = 4_000_000) -> CmdResult:
    """Run ``cmd`` in its own process group; on timeout kill the whole group (ncu and its target too).
    Output goes through temp files and only the last ``max_bytes`` of each stream are kept."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
        )
        timed_out = False
        try:
            proc.wait(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        return CmdResult(
            None if timed_out else proc.returncode,
            _tail(out, max_bytes),
            _tail(err, max_bytes),
            timed_out,
            time.monotonic() - t0,
        )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _tail(f, max_bytes: int) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - max_bytes))
    data = f.read().decode("utf-8", "replace")
    return ("[... output truncated ...]\n" + data) if size > max_bytes else data


def truncate_text(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    keep = max(0, max_chars - 40)
    return text[: keep // 2] + f"\n[... {len(text) - keep} chars cut ...]\n" + text[-(keep - keep // 2) :]


def fit_json(obj, max_bytes: int) -> tuple[object, bool]:
    """Shrink ``obj`` until its JSON is at most ``max_bytes``: cut the longest strings, then the longest lists
    (keeping their head), marking what was cut. Returns (obj, truncated)."""

    def size(o) -> int:
        return len(json.dumps(o, default=str))

    if size(obj) <= max_bytes:
        return obj, False
    obj = json.loads(json.dumps(obj, default=str))
    for _ in range(200):
        if size(obj) <= max_bytes:
            return obj, True
        path, kind, length = _largest(obj)
        if path is None:
            break
        parent, key = _walk(obj, path)
        if kind == "str":
            parent[key] = truncate_text(parent[key], max(40, length // 2))
        else:
            lst = parent[key]
            keep = max(0, len(lst) // 2)
            parent[key] = lst[:keep] + [f"... {len(lst) - keep} more item(s) cut to fit the output limit"]
    text = json.dumps(obj, default=str)
    if len(text) <= max_bytes:
        return obj, True
    return {"truncated_json": truncate_text(text, max_bytes - 100)}, True


def _largest(obj):
    """(path, kind, size) of the biggest cuttable node: a string over 80 chars or a list of 2+ items."""
    best = (None, None, 0)
    stack = [(obj, ())]
    while stack:
        o, p = stack.pop()
        if isinstance(o, dict):
            stack.extend((v, (*p, k)) for k, v in o.items())
        elif isinstance(o, list):
            n = len(json.dumps(o, default=str))
            if len(o) > 1 and p and n > best[2]:
                best = (p, "list", n)
            stack.extend((v, (*p, i)) for i, v in enumerate(o))
        elif isinstance(o, str) and len(o) > 80 and p and len(o) > best[2]:
            best = (p, "str", len(o))
    return best


def _walk(obj, path):
    for k in path[:-1]:
        obj = obj[k]
    return obj, path[-1]
