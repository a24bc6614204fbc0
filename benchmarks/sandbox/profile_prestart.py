"""The profiling process's cost, cold vs pre-started (issue 13), on any machine: the cheap profile's target
(``_target --mode events``, the process a GPU worker starts for every events-mode ``profile``) run through
``_profile._events_in_target`` on the CPU, ``--calls`` times per path, with ``--think-s`` between calls (the
agent's turn, while a pre-started process imports). The first pre-started call is cold by construction and
left out of its median. Usage: ``python -m benchmarks.sandbox.profile_prestart --out results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._results import ROOT, write_results
from kernels_env.tools import ToolContext
from kernels_env.tools._prestart import ENABLE_ENV, PRESTARTER
from kernels_env.tools._profile import _events_in_target

P = ROOT / "tests" / "tools" / "fixtures" / "problems"
SOLUTION = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def calls(args: dict, n: int, think_s: float, device: str) -> list[dict]:
    out = []
    for _ in range(n):
        ctx = ToolContext()
        t0 = time.perf_counter()
        try:
            res = _events_in_target(args, ctx, 1, 3, True, device)
        finally:
            ctx.cleanup()
        out.append(
            {
                "wall_s": round(time.perf_counter() - t0, 3),
                "prestarted": res["target_prestarted"],
                "stages_s": res["target_stages_s"],
            }
        )
        print(json.dumps(out[-1]), flush=True)
        time.sleep(think_s)
    return out


def medians(runs: dict) -> dict:
    """Median wall seconds per path; the pre-started path over its pre-started calls only (its first call is
    cold by construction), None when none was (``--calls 1``, or the process never came up in time)."""
    warm = [r["wall_s"] for r in runs["prestarted"] if r["prestarted"]]
    return {
        "cold": statistics.median(r["wall_s"] for r in runs["cold"]),
        "prestarted": statistics.median(warm) if warm else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="results JSON (default: runs/benchmarks/)")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--think-s", type=float, default=8.0)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    if a.calls < 1:
        ap.error("--calls must be at least 1")
    sol = Path(tempfile.mkdtemp()) / "sol.py"  # a torch candidate: what is measured is the process
    sol.write_text(SOLUTION)
    args = {"reference": str(P / "ref_small.py"), "solution": str(sol)}
    runs = {}
    for path, flag in (("cold", "0"), ("prestarted", "1")):
        os.environ[ENABLE_ENV] = flag
        runs[path] = calls(args, a.calls, a.think_s, a.device)
    PRESTARTER.close()
    med = medians(runs)
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count()}
    env["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    saved = round(med["cold"] - med["prestarted"], 3) if med["prestarted"] is not None else None
    summary = {"median_s": med, "saved_s": saved}
    write_results("profile_prestart", {"environment": env, "summary": summary, "runs": runs}, a.out, indent=1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
