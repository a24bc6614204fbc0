"""``evaluate``: judge one solution against one reference and print the verdict."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..client import SandboxClient
from ..rules.result import CORRECT, JUDGE_ERROR, MACHINE_LIMITS, REFERENCE_ERROR
from .common import add_judge_arguments, add_sandbox_arguments, judge_config, sandbox_config

HELP = "judge one solution (file or workspace directory) against a KernelBench-format reference"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reference", required=True, help="KernelBench-format problem file")
    p.add_argument("--solution", required=True, help="file with class ModelNew, or a workspace dir")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_judge_arguments(p)
    add_sandbox_arguments(p)


def run(args: argparse.Namespace) -> int:
    judge = judge_config(args)
    with SandboxClient(sandbox_config(args), judge) as sb:
        result = sb.evaluate(reference=args.reference, solution=args.solution, judge=judge)
    print(json.dumps(result, indent=2, default=str) if args.json else render(result))
    return EXIT_CODES.get(result["status"], 1)


# The verdict is printed in every case; the exit code says whose outcome it is (kernels_env.cli's codes).
# This machine cannot judge it (insufficient_memory, toolchain_missing): 3, as the judge's own failure.
EXIT_CODES = {CORRECT: 0, REFERENCE_ERROR: 2, JUDGE_ERROR: 3, **dict.fromkeys(MACHINE_LIMITS, 3)}  # else 1


def _ms(stats: dict[str, Any]) -> str:
    if "median_ms" not in stats:
        return stats.get("error") or stats.get("skipped") or "n/a"
    s = stats
    return f"{s['median_ms']:.4f} ms (IQR {s['iqr_ms']:.4f}, min {s['min_ms']:.4f}, n={s['count']})"


def render(r: dict[str, Any]) -> str:
    head = f"{r['solution']} vs {r['problem']}: {r['status'].upper()}"
    lines = [f"{head}  reward={r['reward']} ({r['reward_fn']})"]
    if r["error"]:
        lines.append(f"  {r['error']}")
    for m in r["messages"]:
        if m["kind"] in ("compiler", "mismatch", "note"):
            lines.append(f"  [{m['kind']}] {m['text']}")
        elif m["kind"] == "traceback":
            lines.extend("  " + x for x in m["text"].splitlines())
    c = r.get("correctness")
    if c:
        lines.append(
            f"  correctness: {c.get('passed')}/{c['trials']} trials ({c['mode']} mode, weights "
            f"{c['weight_sync']['method']}, {c['order']})"
        )
    t = r.get("timings")
    if t:
        note = "" if t["comparable"] else "  [CPU mode: not comparable]"
        lines.append(f"  candidate: {_ms(t['candidate'])}{note}")
        for mode, stats in t["baselines"].items():
            s = r["speedups"].get(mode)
            lines.append(f"  {mode:>12}: {_ms(stats)}" + (f"  speedup {s:.3f}x" if s else ""))
    j, env = r["judge"], r["environment"]
    where = f"device={env.get('device')} {env.get('gpu') or ''}".rstrip()
    lines.append(f"  protocol={j.get('protocol')} policy={j.get('policy')} {where}")
    return "\n".join(lines)
