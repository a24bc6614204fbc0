"""The tools from the command line.

``python -m kernels_env compile|profile|sanitize|roofline --reference REF.py --solution SOL_OR_WORKSPACE
[--json]``.

The lead wires ``compile_main``, ``profile_main``, ``sanitize_main`` and ``roofline_main`` into the
kernels_env CLI registry. Each runs its tool in a child process (``run_tool_subprocess``), prints the short
text (or the full JSON response with ``--json``) and returns 0 when the tool succeeded, 1 when it ran and
found problems or failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys

from ._spawn import run_tool_subprocess


def _parser(tool: str, needs_solution: bool = True) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"python -m kernels_env {tool}")
    ap.add_argument("--reference", required=tool != "compile", help="KernelBench reference (class Model)")
    if needs_solution:
        ap.add_argument(
            "--solution", required=True, help="solution .py (class ModelNew) or workspace directory"
        )
    ap.add_argument("--json", action="store_true", help="print the full JSON response")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds (default: per tool)")
    ap.add_argument("--max-output", type=int, default=200_000, help="bytes of response")
    return ap


def _run(tool: str, ns: argparse.Namespace, args: dict) -> int:
    limits = {"max_output_bytes": ns.max_output}
    if ns.time_limit:
        limits["time_s"] = ns.time_limit
    args = {k: v for k, v in args.items() if v is not None}
    resp = run_tool_subprocess(tool, args, limits)
    if ns.json:
        print(json.dumps(resp, indent=1, default=str))
    else:
        print(resp.get("text") or resp.get("error") or "")
        if resp.get("error") and resp.get("text") and resp["error"] not in resp["text"]:
            print(f"error: {resp['error']}", file=sys.stderr)
    return 0 if resp.get("ok") else 1


def compile_main(argv: list[str] | None = None) -> int:
    ap = _parser("compile")
    ap.add_argument("--sass", action="store_true", help="add the SASS instruction mix per kernel")
    ap.add_argument("--arch", default=None, help="e.g. sm_90 (default: this GPU, else sm_90)")
    ns = ap.parse_args(argv)
    return _run(
        "compile", ns, {"reference": ns.reference, "solution": ns.solution, "sass": ns.sass, "arch": ns.arch}
    )


def profile_main(argv: list[str] | None = None) -> int:
    ap = _parser("profile")
    ap.add_argument("--mode", choices=("auto", "ncu", "events"), default="auto")
    ap.add_argument("--no-reference", action="store_true", help="skip the eager reference's kernels")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--max-launches", type=int, default=None)
    ap.add_argument("--kernel-regex", default=None, help="profile only kernels whose name matches")
    ns = ap.parse_args(argv)
    return _run(
        "profile",
        ns,
        {
            "reference": ns.reference,
            "solution": ns.solution,
            "mode": ns.mode,
            "include_reference": not ns.no_reference,
            "iters": ns.iters,
            "max_launches": ns.max_launches,
            "kernel_regex": ns.kernel_regex,
        },
    )


def sanitize_main(argv: list[str] | None = None) -> int:
    ap = _parser("sanitize")
    ap.add_argument("--tools", default="memcheck,racecheck,initcheck")
    ap.add_argument("--kernel-substring", default=None, help="check only kernels whose name contains this")
    ns = ap.parse_args(argv)
    return _run(
        "sanitize",
        ns,
        {
            "reference": ns.reference,
            "solution": ns.solution,
            "tools": ns.tools,
            "kernel_substring": ns.kernel_substring,
        },
    )


def roofline_main(argv: list[str] | None = None) -> int:
    ap = _parser("roofline", needs_solution=False)
    ap.add_argument("--device-name", default=None, help="spec-sheet ceilings without a GPU, e.g. H200")
    ap.add_argument("--measured-us", type=float, default=None)
    ns = ap.parse_args(argv)
    return _run(
        "roofline",
        ns,
        {"reference": ns.reference, "device_name": ns.device_name, "measured_us": ns.measured_us},
    )


MAINS = {
    "compile": compile_main,
    "profile": profile_main,
    "sanitize": sanitize_main,
    "roofline": roofline_main,
}
