"""Tools by name, and the one entry point a sandbox worker calls for a ``tool`` request.

Request:  {"tool": "compile"|"profile"|"sanitize"|"roofline", "args": {...},
           "limits": {"time_s", "max_output_bytes"}}
Response: {"protocol": 1, "tool", "ok", "result" (structured JSON), "text" (short, for the agent),
           "error" (str|None), "elapsed_s", "truncated" (bool)}
In-process, the deadline bounds every external command a tool starts (nvcc, ncu, compute-sanitizer); the
process hosting the call (the core's worker, or ``_spawn``) enforces the hard limit by killing it.
"""

from __future__ import annotations

import time
import traceback

from ._compile import compile_tool
from ._context import ToolContext, ToolError, ToolLimits, fit_json, truncate_text
from ._profile import profile_tool, roofline_block
from ._render import RENDERERS
from ._sanitize import sanitize_tool

PROTOCOL = 1


def roofline_tool(args: dict, ctx: ToolContext) -> dict:
    if not args.get("reference"):
        raise ToolError("roofline needs 'reference'")
    from ._profile import _cuda

    return roofline_block(args, _cuda(), args.get("measured_us"))


TOOLS = {
    "compile": compile_tool,
    "profile": profile_tool,
    "sanitize": sanitize_tool,
    "roofline": roofline_tool,
}


def run_tool(name: str, args: dict | None = None, limits: dict | ToolLimits | None = None) -> dict:
    """Run one tool in THIS process (call it only inside a sandbox process) and return the response."""
    t0 = time.monotonic()
    resp = {
        "protocol": PROTOCOL,
        "tool": name,
        "ok": False,
        "result": None,
        "text": "",
        "error": None,
        "elapsed_s": 0.0,
        "truncated": False,
    }
    ctx = None
    try:
        if name not in TOOLS:
            raise ToolError(f"unknown tool {name!r}; available: {sorted(TOOLS)}")
        if args is not None and not isinstance(args, dict):
            raise ToolError("args must be a JSON object")
        lim = limits if isinstance(limits, ToolLimits) else ToolLimits.from_dict(limits, name)
        ctx = ToolContext(limits=lim)
        result = TOOLS[name](dict(args or {}), ctx)
        resp["result"] = result
        resp["ok"] = bool(result.get("ok", True)) and not result.get("error")
        resp["text"] = RENDERERS[name](result)
    except ToolError as e:
        resp["error"] = str(e)
        resp["text"] = f"{name}: {e}"
    except (FileNotFoundError, AttributeError, ImportError, SyntaxError) as e:
        resp["error"] = f"{type(e).__name__}: {e}"
        resp["text"] = f"{name}: {resp['error']}"
    except BaseException as e:  # noqa: BLE001 - a tool never takes its host down; KeyboardInterrupt included
        resp["error"] = f"{type(e).__name__}: {e}"
        resp["traceback"] = traceback.format_exc()[-3000:]
        resp["text"] = f"{name} failed: {resp['error']}"
    finally:
        if ctx is not None:
            ctx.cleanup()
    resp["elapsed_s"] = round(time.monotonic() - t0, 3)
    max_bytes = ctx.limits.max_output_bytes if ctx else ToolLimits().max_output_bytes
    return fit_response(resp, max_bytes)


def fit_response(resp: dict, max_bytes: int) -> dict:
    """The text gets at most a quarter of the budget; the structured result is shrunk into the rest."""
    text_budget = max(256, max_bytes // 4)
    if len(resp.get("text") or "") > text_budget:
        resp["text"] = truncate_text(resp["text"], text_budget)
        resp["truncated"] = True
    fitted, cut = fit_json(resp, max_bytes)
    if cut:
        fitted = (
            fitted
            if isinstance(fitted, dict) and "tool" in fitted
            else {
                **{k: resp[k] for k in ("protocol", "tool", "ok", "error", "elapsed_s")},
                "text": truncate_text(resp.get("text") or "", text_budget),
                "result": None,
            }
        )
        fitted["truncated"] = True
    return fitted


def handle_tool_request(request: dict) -> dict:
    """What the core's worker calls for a ``{"type": "tool", ...}`` request."""
    if not isinstance(request, dict) or "tool" not in request:
        return {
            "protocol": PROTOCOL,
            "tool": None,
            "ok": False,
            "result": None,
            "text": "",
            "error": "a tool request needs 'tool', 'args' and optionally 'limits'",
            "elapsed_s": 0.0,
            "truncated": False,
        }
    return run_tool(request["tool"], request.get("args") or {}, request.get("limits"))
