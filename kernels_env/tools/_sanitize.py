"""The ``sanitize`` tool: the candidate's forward under compute-sanitizer, one run per checker, summarised."""

from __future__ import annotations

import json

from ._candidate import resolve_candidate
from ._capture import capture, source_locator
from ._context import ToolContext, ToolError, run_cmd
from ._profile import _cuda, target_argv, target_env
from ._sanitizer import TOOLS, find_sanitizer, parse_sanitizer, sanitizer_command

DEFAULT_TOOLS = ("memcheck", "racecheck", "initcheck")


def sanitize_tool(args: dict, ctx: ToolContext) -> dict:
    for key in ("reference", "solution"):
        if not args.get(key):
            raise ToolError(f"sanitize needs '{key}'")
    tools = args.get("tools") or list(DEFAULT_TOOLS)
    if isinstance(tools, str):
        tools = [t.strip() for t in tools.split(",") if t.strip()]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        raise ToolError(f"unknown sanitizer tool(s) {bad}; choose from {list(TOOLS)}")
    san = find_sanitizer()
    if not _cuda() or san is None:
        raise ToolError("sanitize needs a CUDA GPU and compute-sanitizer (PATH or /usr/local/cuda/bin)")
    locate = _locator(args["solution"])
    out: dict = {"tools": {}, "clean": True}
    for i, tool in enumerate(tools):
        budget = ctx.check_time(tool) / (len(tools) - i)
        tmp = ctx.tmpdir()
        log, result_file = tmp / f"{tool}.log", tmp / f"{tool}_target.json"
        cmd = sanitizer_command(
            san,
            tool,
            target_argv(args, "candidate", "once", result_file, 0, 1),
            str(log),
            print_limit=int(args.get("print_limit", 20)),
            kernel_substring=args.get("kernel_substring"),
        )
        env = target_env()
        # Without the caching allocator every tensor is its own cudaMalloc, so memcheck sees exact bounds and
        # initcheck sees fresh memory; with it, a small overrun lands inside a cached 2 MB segment unseen.
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        res = run_cmd(cmd, budget, env=env)
        text = log.read_text(errors="replace") if log.exists() else res.stdout + res.stderr
        rep = parse_sanitizer(text, tool)
        target = json.loads(result_file.read_text()) if result_file.exists() else {}
        rep["elapsed_s"] = round(res.elapsed_s, 2)
        if res.timed_out:
            rep["timed_out"] = True
            rep["completed"] = False
        if not target.get("ok") and target.get("error"):
            rep["target_error"] = target["error"]
        if not rep["completed"]:
            rep["log_tail"] = (text + res.stderr)[-2000:]
        rep["clean"] = bool(rep.get("clean")) and not res.timed_out
        for finding in rep["findings"]:
            _to_python_lines(finding, locate)
        out["tools"][tool] = rep
        out["clean"] = out["clean"] and rep["clean"]
    return out


def _locator(solution: str):
    """Kernel source locations -> the candidate's Python lines (its import is cheap: builds are cached)."""
    c = resolve_candidate(solution)
    try:
        return source_locator(capture(c), c.python_files())
    except Exception:  # noqa: BLE001 - without the map, findings keep the kernel source's own locations
        return lambda file, line, kernel: None


def _to_python_lines(finding: dict, locate) -> None:
    """``file``/``line`` become the candidate's Python file and line when the kernel is a string there
    (``unit``/``unit_line`` keep the kernel source's own); the same for a race's other access."""
    where = locate(finding.get("file"), finding.get("line"), finding.get("kernel"))
    if where is not None:
        finding["unit"], finding["unit_line"] = finding["file"], finding["line"]
        finding["file"], finding["line"] = where
    other = finding.get("other")
    if other:
        where = locate(other.get("file"), other.get("line"), finding.get("kernel"))
        if where is not None:
            other["unit"], other["unit_line"] = other["file"], other["line"]
            other["file"], other["line"] = where
