"""Command-line interface: a registry of subcommands, one module each.

A subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Adding one is one line in ``COMMANDS`` plus its module.
Exit codes: 0 success (evaluate: the verdict is ``correct``), 1 a verdict other than correct (batch: some
solution could not be read or got no verdict on the candidate), 2 a usage or input error (evaluate: also a
``reference_error`` verdict), 3 the sandbox or the judge itself failed (evaluate: also a ``judge_error``
verdict, or ``insufficient_memory`` / ``toolchain_missing``: this machine cannot judge it), 130
interrupted. Every evaluate and batch request prints its verdict; input errors print one line.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..runtime.errors import BrokenReference, SandboxError

COMMANDS: dict[str, str] = {
    "evaluate": "kernels_env.cli.evaluate",
    "baseline": "kernels_env.cli.baseline",
    "batch": "kernels_env.cli.batch",
    "compile": "kernels_env.cli.compile",
    "profile": "kernels_env.cli.profile",
    "sanitize": "kernels_env.cli.sanitize",
    "roofline": "kernels_env.cli.roofline",
    "audit": "kernels_env.cli.audit",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels_env", description="The CUDA kernel sandbox.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = {}
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    args = parser.parse_args(argv)
    try:
        return modules[args.command].run(args)
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError, BrokenReference) as exc:  # the user's input: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SandboxError as exc:
        print(f"sandbox error: {exc}", file=sys.stderr)
        return 3
