"""The agent's tools: one JSON-schema description for every policy, and their execution against an episode's
``WorkspaceSession``. A failing call (unknown tool, bad JSON, protected file, sandbox limits) is an
observation the policy can react to, never an exception; every observation is cut to a byte budget with a
note saying so."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from kernels_env.client import CORRECT, JudgeConfig
from kernels_env.session import WorkspaceError, WorkspaceSession

from .actions import ToolCall


def _fn(name: str, description: str, properties: dict | None = None, required: list[str] | None = None):
    params = {"type": "object", "properties": properties or {}, "required": required or []}
    params["additionalProperties"] = False
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


_PATH = {"type": "string", "description": "path inside the workspace, e.g. model_new.py or kernels/add.cu"}
TOOL_SPECS: list[dict[str, Any]] = [
    _fn("list_files", "List the workspace's files with sizes and whether you may write them."),
    _fn(
        "read_file",
        "Read a workspace file (model.py is the reference, read-only).",
        {"path": _PATH, "offset": {"type": "integer", "description": "first byte (default 0)"}},
        ["path"],
    ),
    _fn(
        "write_file",
        "Create or overwrite model_new.py or a file under kernels/ (.cu/.cuh/.h/.cpp/.py...).",
        {"path": _PATH, "content": {"type": "string"}},
        ["path", "content"],
    ),
    _fn(
        "edit_file",
        "Replace the one occurrence of `old` in a file by `new` (fails if `old` occurs 0 or 2+ times).",
        {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}},
        ["path", "old", "new"],
    ),
    _fn(
        "compile",
        "Build the workspace's kernels: diagnostics with file:line, ptxas registers/smem/spills per kernel.",
        {"sass": {"type": "boolean", "description": "also report the SASS instruction mix"}},
    ),
    _fn(
        "verify",
        "Check ModelNew against the reference on fresh random inputs and adversarial input families: "
        "pass/fail with the first mismatch.",
    ),
    _fn("benchmark", "Correctness plus timing against PyTorch eager and torch.compile: the speedups."),
    _fn(
        "profile",
        "Nsight Compute summary per kernel (time share, DRAM/SM throughput, occupancy) with a bottleneck "
        "label.",
        {"mode": {"type": "string", "enum": ["auto", "ncu", "events"]}},
    ),
    _fn(
        "sanitize",
        "compute-sanitizer memcheck/racecheck/initcheck/synccheck findings with source lines.",
        {"tools": {"type": "string", "description": "comma-separated checkers (default: all four)"}},
    ),
    _fn("roofline", "FLOPs, compulsory bytes and the roofline floor time of the reference on this GPU."),
    _fn(
        "skill",
        "Search the optimisation guide and verified example kernels (coalescing, tiling, vectorised loads, "
        "warp shuffles, online softmax, fusion, tensor cores, CUDA graphs).",
        {"query": {"type": "string"}},
        ["query"],
    ),
    _fn("submit", "Finish: the workspace as it stands is judged once more by the full harness."),
]
TOOL_NAMES = tuple(t["function"]["name"] for t in TOOL_SPECS)
SANDBOX_TOOLS = ("compile", "profile", "sanitize", "roofline")
JUDGE_TOOLS = ("verify", "benchmark")  # their ToolResult carries the verdict


def tool_specs(skills: bool) -> list[dict[str, Any]]:
    """The tools offered to the policy (without ``skill`` when skills are switched off)."""
    return [t for t in TOOL_SPECS if skills or t["function"]["name"] != "skill"]


@dataclass
class ToolResult:
    """What one call returned: the observation text the policy sees (already truncated), whether it
    succeeded, and bookkeeping for the trajectory record. ``verdict``: the sandbox's result
    (``kernels_env.client.Result.to_dict()``) of a ``verify`` / ``benchmark`` call that was judged, beside its
    text, so that code reads the verdict itself, never the text; None for every other call."""

    call_id: str
    name: str
    text: str
    ok: bool
    elapsed_s: float = 0.0
    truncated: bool = False
    submitted: bool = False
    verdict: dict[str, Any] | None = None

    def message(self) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": self.call_id, "name": self.name, "content": self.text}


def truncate(text: str, max_bytes: int) -> tuple[str, bool]:
    """Head and tail of ``text`` within ``max_bytes`` (UTF-8) and a note of what was cut."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text, False
    keep = max(0, max_bytes - 120)
    head, tail = data[: keep * 2 // 3], data[len(data) - keep // 3 :] if keep // 3 else b""
    note = (
        f"\n[... observation truncated: {len(data) - len(head) - len(tail)} of {len(data)} bytes cut ...]\n"
    )
    return head.decode("utf-8", "ignore") + note + tail.decode("utf-8", "ignore"), True


def render_verdict(verdict: dict[str, Any], timed: bool) -> str:
    """A short text of a judge result for the policy."""
    status = verdict.get("status")
    lines = [
        f"status: {status}"
        + (f" (reward {verdict['reward']:g})" if verdict.get("reward") is not None else "")
    ]
    if verdict.get("error"):
        lines.append(f"error: {verdict['error']}")
    for m in verdict.get("messages") or []:
        if m.get("kind") in ("mismatch", "compiler", "traceback") and m.get("text"):
            lines.append(f"{m['kind']}: {m['text']}")
            break
    if timed:
        sp = {k: v for k, v in (verdict.get("speedups") or {}).items() if v is not None}
        if sp:
            lines.append("speedups: " + ", ".join(f"{k} {v:.3f}x" for k, v in sp.items()))
        elif status == "correct":
            lines.append("speedups: n/a (timings not comparable on this sandbox)")
    if status == "not_run":
        lines.append("note: CPU sandbox: CUDA code compiled but was not executed")
    return "\n".join(lines)


_SPECS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOL_SPECS}
_TYPES = {"string": str, "integer": int, "boolean": bool}


def _check_arguments(name: str, args: dict) -> str | None:
    """A one-line error when ``args`` do not fit the tool's schema (names, required keys, simple types)."""
    schema = _SPECS[name]
    props = schema["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        return f"{name} takes no argument(s) {unknown}; its arguments: {sorted(props) or 'none'}"
    missing = [k for k in schema["required"] if k not in args]
    if missing:
        return f"{name} needs argument(s) {missing}"
    for key, value in args.items():
        want = _TYPES.get(props[key].get("type"))
        if want is not None and not isinstance(value, want) or (want is int and isinstance(value, bool)):
            return f"argument {key!r} of {name} must be a {props[key]['type']}, got {type(value).__name__}"
        if "enum" in props[key] and value not in props[key]["enum"]:
            return f"argument {key!r} of {name} must be one of {props[key]['enum']}"
    return None


def call_validity(call: ToolCall, offered) -> tuple[bool, bool, str | None]:
    """(valid, known, why not) of one call, the two reasons CUDA Agent's RFT drops an episode kept apart:
    ``valid`` when its block and arguments parse and, for an offered tool, fit that tool's schema;
    ``known`` when it names an offered tool (else a hallucinated call; a block too broken to name any
    tool is invalid, not hallucinated)."""
    args, error = call.parsed()
    if error is not None:
        return False, not call.name or call.name in offered, error
    if call.name not in offered:
        return True, False, f"unknown tool {call.name!r}"
    error = _check_arguments(call.name, args)
    return error is None, True, error


class ToolBox:
    """Runs tool calls for one episode. ``skills``: a :class:`research.agent.SkillLibrary` or None (the
    ``skill`` tool then answers that skills are off). ``judge``: the judge of ``verify``/``benchmark``."""

    def __init__(
        self, ws: WorkspaceSession, judge: JudgeConfig, skills=None, *, max_bytes: int = 8192, k: int = 3
    ):
        self.ws, self.judge, self.skills = ws, judge, skills
        self.max_bytes, self.k = max_bytes, k

    def run(self, call: ToolCall) -> ToolResult:
        started = time.perf_counter()
        args, error = call.parsed()
        if error is None and call.name not in TOOL_NAMES:
            error = f"unknown tool {call.name!r}; available: {', '.join(TOOL_NAMES)}"
        if error is None:
            error = _check_arguments(call.name, args)
        ok, submitted, verdict = False, False, None
        if error is not None:
            text = f"error: {error}"
        else:
            try:
                if call.name in JUDGE_TOOLS:
                    timed = call.name == "benchmark"
                    verdict = self._evaluate(timed)
                    text, ok = render_verdict(verdict, timed), verdict.get("status") == CORRECT
                else:
                    text, ok = getattr(self, "_" + call.name)(**args)
                submitted = call.name == "submit"
            except WorkspaceError as exc:
                text = f"error: {exc}"
            except Exception as exc:  # the tool broke, not the episode: the policy is told and goes on
                text = f"error: {call.name} failed: {type(exc).__name__}: {exc}"
        text, cut = truncate(text, self.max_bytes)
        elapsed = time.perf_counter() - started
        return ToolResult(call.id, call.name, text, ok, elapsed, cut, submitted, verdict)

    # -- file tools ------------------------------------------------------------------------------------------
    def _list_files(self):
        files = self.ws.list_files()
        rows = [
            f"{f['path']}\t{f['bytes']} bytes\t{'writable' if f['writable'] else 'read-only'}" for f in files
        ]
        return "\n".join(rows) or "(empty workspace)", True

    def _read_file(self, path: str, offset: int = 0):
        text = self.ws.read_file(path)
        return text[int(offset) :] if offset else text, True

    def _write_file(self, path: str, content: str):
        info = self.ws.write_file(path, content)
        return f"wrote {info['path']} ({info['bytes']} bytes)", True

    def _edit_file(self, path: str, old: str, new: str):
        text = self.ws.read_file(path)
        count = text.count(old) if old else 0
        if count != 1:
            return f"error: `old` occurs {count} times in {path}; it must occur exactly once", False
        info = self.ws.write_file(path, text.replace(old, new, 1))
        return f"edited {info['path']} ({info['bytes']} bytes)", True

    # -- sandbox tools ---------------------------------------------------------------------------------------
    def _sandbox(self, name: str, args: dict) -> tuple[str, bool]:
        resp = self.ws.call(name, args)
        text = resp.get("text") or resp.get("error") or json.dumps(resp.get("result"))[:2000]
        if resp.get("warnings"):
            text += "\nwarnings: " + "; ".join(map(str, resp["warnings"]))
        return text, bool(resp.get("ok"))

    def _compile(self, sass: bool = False):
        return self._sandbox("compile", {"sass": bool(sass)})

    def _profile(self, mode: str = "auto"):
        return self._sandbox("profile", {"mode": mode})

    def _sanitize(self, tools: str = "memcheck,racecheck,initcheck,synccheck"):
        return self._sandbox("sanitize", {"tools": tools})

    def _roofline(self):
        return self._sandbox("roofline", {})

    def _evaluate(self, timed: bool) -> dict[str, Any]:
        """``verify`` (correctness only) and ``benchmark`` (with timings): the sandbox's verdict."""
        return self.ws.evaluate(judge=dataclasses.replace(self.judge, time_candidate=timed))

    # -- skills and submit -----------------------------------------------------------------------------------
    def _skill(self, query: str):
        if self.skills is None:
            return "error: skills are switched off in this run", False
        hits = self.skills.search(str(query), k=self.k)
        return self.skills.render(hits) if hits else f"no skill matches {query!r}", bool(hits)

    def _submit(self):
        return "submitted: the workspace will be judged by the full harness", True
