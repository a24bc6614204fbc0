"""Tools by name, and ``run_tool``: one tool call in this process, as a sandbox worker makes it.

Response: {"protocol": 1, "tool", "ok", "result" (structured JSON), "text" (short, for the agent),
           "error" (str|None), "elapsed_s", "truncated" (bool)}
In-process, the deadline bounds every external command a tool starts (nvcc, ncu, compute-sanitizer); the
worker hosting the call enforces the hard limit by killing it (``_serve``,
``kernels_env.runtime.supervisor``).
"""

from __future__ import annotations

import time
import traceback

from ..fastpath.diagnostics import format_diagnostic
from ._candidate import CandidateError
from ._compile import compile_tool
from ._context import ToolContext, ToolError, ToolLimits, fit_json, truncate_text
from ._profile import _cuda, _device_name, profile_tool, roofline_block
from ._render import RENDERERS
from ._sanitize import sanitize_tool

PROTOCOL = 1


def roofline_tool(args: dict, ctx: ToolContext) -> dict:
    if not args.get("reference"):
        raise ToolError("roofline needs 'reference'")
    cuda = _cuda()
    out = roofline_block(args, cuda, args.get("measured_us"))
    out["device"] = _device_name(True) if cuda else args.get("device_name")
    return out


TOOLS = {
    "compile": compile_tool,
    "profile": profile_tool,
    "sanitize": sanitize_tool,
    "roofline": roofline_tool,
}


def error_response(tool: str | None, error: str | None) -> dict:
    """A response without a result (``error`` None: the empty response ``run_tool`` fills in)."""
    return {
        "protocol": PROTOCOL,
        "tool": tool,
        "ok": False,
        "result": None,
        "text": f"{tool}: {error}" if error else "",
        "error": error,
        "elapsed_s": 0.0,
        "truncated": False,
    }


def run_tool(name: str, args: dict | None = None, limits: dict | ToolLimits | None = None) -> dict:
    """Run one tool in THIS process (call it only inside a sandbox process) and return the response."""
    t0 = time.monotonic()
    resp = error_response(name, None)
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
    except CandidateError as e:  # the candidate does not import: where and why, as the compiler says it
        resp["error"] = format_diagnostic(e.diagnostic)
        resp["diagnostic"] = e.diagnostic
        resp["text"] = f"{name}: {resp['error']}" + (
            f"\n{e.diagnostic['traceback']}" if "traceback" in e.diagnostic else ""
        )
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
