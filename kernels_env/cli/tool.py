"""What the tool subcommands (``compile``, ``profile``, ``sanitize``, ``roofline``) share: the arguments, one
sandbox client, and the output (the tool's short text, or its whole JSON response with ``--json``).

Exit codes: 0 the tool ran and found nothing wrong, 1 it found problems (compile errors, sanitizer findings)
or failed, 2 usage or input error, 3 the sandbox failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from ..client import SandboxClient
from ..judge.build.sources import read_source
from .common import add_sandbox_arguments, sandbox_config


def add_tool_arguments(p: argparse.ArgumentParser, *, solution: bool = True, reference: bool = True) -> None:
    p.add_argument("--reference", required=reference, help="KernelBench-format problem file (class Model)")
    if solution:
        p.add_argument("--solution", required=True, help="file with class ModelNew, or a workspace directory")
    p.add_argument("--json", action="store_true", help="print the whole JSON response")
    p.add_argument("--time-limit", type=float, default=None, help="seconds (default: the tool's own)")
    p.add_argument("--max-output", type=int, default=200_000, help="bytes of response (default: 200000)")
    add_sandbox_arguments(p)


def run_tool(name: str, args: argparse.Namespace, tool_args: dict[str, Any]) -> int:
    """Run tool ``name`` on ``args.reference`` / ``args.solution`` (those of ``add_tool_arguments``) with the
    subcommand's own ``tool_args``; an argument that is None is left to the tool's default."""
    if getattr(args, "reference", None):
        read_source(
            args.reference, "reference"
        )  # a missing file is a usage error (exit 2), not a tool failure
    if getattr(args, "solution", None):
        read_source(args.solution, "solution", allow_workspace=True)
    limits: dict[str, Any] = {"max_output_bytes": args.max_output}
    if args.time_limit:
        limits["time_s"] = args.time_limit
    files = {"reference": getattr(args, "reference", None), "solution": getattr(args, "solution", None)}
    tool_args = {k: v for k, v in {**files, **tool_args}.items() if v is not None}
    # one call: no standby, and no profiling process pre-started for a next call
    config = dataclasses.replace(sandbox_config(args), standby_run_workers=False, prestart_profiler=False)
    with SandboxClient(config) as sb:
        resp = sb.tool(name, tool_args, limits)
    if args.json:
        print(json.dumps(resp, indent=1, default=str))
    else:
        print(resp.get("text") or resp.get("error") or "")
        if resp.get("error") and resp["error"] not in (resp.get("text") or ""):
            print(f"error: {resp['error']}", file=sys.stderr)
    return 0 if resp.get("ok") else 1
