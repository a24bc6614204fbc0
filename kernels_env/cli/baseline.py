"""``baseline``: time a reference in eager / torch.compile / max-autotune mode (disk-cached)."""

from __future__ import annotations

import argparse
import json

from ..client import SandboxClient
from .common import add_judge_arguments, add_sandbox_arguments, judge_config, sandbox_config
from .evaluate import _ms

HELP = "time a KernelBench-format reference in each baseline mode (cached on disk)"


# not shared with evaluate: alike only in calling the same option helpers; their own options differ
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reference", required=True, help="KernelBench-format problem file")
    p.add_argument("--json", action="store_true", help="print the baselines as JSON")
    add_judge_arguments(p)
    add_sandbox_arguments(p)


def run(args: argparse.Namespace) -> int:
    judge = judge_config(args)
    with SandboxClient(sandbox_config(args), judge) as sb:
        out = sb.baseline(reference=args.reference, judge=judge)
        env = sb.environment
    if args.json:
        print(json.dumps({**out, "environment": env}, indent=2, default=str))
        return 0
    note = "" if out["comparable"] else "  (CPU mode: not comparable)"
    print(f"{out['problem']} on {env.get('gpu') or env.get('cpu')}{note}")
    for mode, stats in out["baselines"].items():
        cached = " [cached]" if stats.get("cached") else ""
        print(f"  {mode:>12}: {_ms(stats)}{cached}")
    return 0
