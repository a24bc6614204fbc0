"""``roofline``: the task's floor (FLOPs and bytes that must move) against the device's ceilings."""

from __future__ import annotations

import argparse

from .tool import add_tool_arguments, run_tool

HELP = "roofline floor of a task: FLOPs and compulsory bytes of the reference, against the GPU's ceilings"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_tool_arguments(p, solution=False)
    p.add_argument("--device-name", default=None, help="spec-sheet ceilings without a GPU, e.g. H200")
    p.add_argument("--measured-us", type=float, default=None, help="a candidate's time, for its distance")


def run(args: argparse.Namespace) -> int:
    return run_tool("roofline", args, {"device_name": args.device_name, "measured_us": args.measured_us})
