"""``compile``: compiler diagnostics (file:line in the agent's files), ptxas resources, SASS mix."""

from __future__ import annotations

import argparse

from .tool import add_tool_arguments, run_tool

HELP = "compile a solution's kernels: diagnostics, registers/shared memory/spills per kernel, SASS mix"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_tool_arguments(p, reference=False)
    p.add_argument("--sass", action="store_true", help="add the SASS instruction mix per kernel")
    p.add_argument("--arch", default=None, help="e.g. sm_90 (default: the sandbox's GPU, else sm_90)")


def run(args: argparse.Namespace) -> int:
    return run_tool("compile", args, {"sass": args.sass, "arch": args.arch})
