"""``profile``: where the candidate's forward spends its time and why, per kernel, next to the reference."""

from __future__ import annotations

import argparse

from .tool import add_tool_arguments, run_tool

HELP = "profile a solution's kernels (Nsight Compute or CUDA events): time share, throughput, bottleneck"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_tool_arguments(p)
    p.add_argument("--mode", choices=("auto", "ncu", "events"), default="auto")
    p.add_argument("--no-reference", action="store_true", help="skip the eager reference's kernels")
    p.add_argument("--iters", type=int, default=None, help="forwards profiled")
    p.add_argument("--max-launches", type=int, default=None, help="kernel launches profiled (ncu)")
    p.add_argument("--kernel-regex", default=None, help="profile only kernels whose name matches")


def run(args: argparse.Namespace) -> int:
    tool_args = {
        "mode": args.mode,
        "include_reference": not args.no_reference,
        "iters": args.iters,
        "max_launches": args.max_launches,
        "kernel_regex": args.kernel_regex,
    }
    return run_tool("profile", args, tool_args)
