"""``sanitize``: the candidate's forward under compute-sanitizer (memcheck, racecheck, initcheck)."""

from __future__ import annotations

import argparse

from .tool import add_tool_arguments, run_tool

HELP = "run a solution under compute-sanitizer: out-of-bounds accesses, races, uninitialised reads"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_tool_arguments(p)
    p.add_argument("--tools", default="memcheck,racecheck,initcheck", help="comma-separated checkers")
    p.add_argument("--kernel-substring", default=None, help="check only kernels whose name contains this")


def run(args: argparse.Namespace) -> int:
    return run_tool("sanitize", args, {"tools": args.tools, "kernel_substring": args.kernel_substring})
