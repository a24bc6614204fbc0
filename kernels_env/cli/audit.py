"""``audit``: flag degenerate problems (constant outputs, zeros or a constant passing, insensitivity to inputs
or weights) with reasons; see ``kernels_env.reports.audit``."""

from __future__ import annotations

import argparse

HELP = "flag degenerate problems: outputs a constant, zeros or an input-blind answer would pass"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", required=True, help="a problem file or a directory of them (recursive)")
    p.add_argument(
        "--tolerance", type=float, action="append", help="atol=rtol; repeatable (default 1e-4, 1e-2)"
    )
    p.add_argument("--seeds", type=int, default=3, help="input seeds per problem (default 3)")
    p.add_argument("--device", default="auto", help="cpu | cuda | auto (default)")
    p.add_argument("--eval", action="store_true", help="call .eval() on the model (CUDA Agent protocol)")
    p.add_argument(
        "--max-input-gb",
        type=float,
        default=None,
        help="skip problems with larger inputs (default: a third of the GPU's free memory, or of the host's "
        "available memory on a CPU: one input set and two outputs are alive at a time)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.add_argument("--out", help="append each problem's report to this JSONL file as soon as it is done")
    p.add_argument(
        "--resume",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="skip problems already in --out (default; --no-resume starts the file over)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    from ..reports.audit import run as audit  # imports torch: only this subcommand pays for it

    return audit(args)
