"""Where the judge spends a candidate's seconds, function by function (developer tool for issue 3's
throughput target): evaluates benchmark fast-path solutions through ``SandboxClient`` with
``KERNELS_ENV_PROFILE_DIR`` set (each run-worker request is profiled with cProfile), then prints the
aggregated top functions by cumulative and by own time, and every verdict's ``run_phases``.

    python -m benchmarks.sandbox.judge_profile --tasks 01_relu,10_matmul --repeat 2 [--policy cuda_agent]
"""

from __future__ import annotations

import argparse
import io
import json
import pstats
import sys
import tempfile
from pathlib import Path

AREA = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="01_relu,10_matmul")
    ap.add_argument("--repeat", type=int, default=2, help="evaluations per task (the first warms baselines)")
    ap.add_argument("--policy", default="cuda_agent")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--top", type=int, default=45)
    ap.add_argument("--tasks-dir", type=Path, default=AREA / "tasks")
    ap.add_argument("--solutions-dir", type=Path, default=AREA / "solutions" / "fastpath")
    args = ap.parse_args(argv)
    import os

    from kernels_env.runtime.devices import visible_gpus

    on_cpu = args.device == "cpu" or (args.device == "auto" and not visible_gpus())
    if on_cpu and args.solutions_dir.resolve() == (AREA / "solutions" / "fastpath").resolve():
        # NVRTC kernels: on a CPU every verdict would be "cannot run", and the profile of that is no use
        print("judge_profile: the fast-path solutions need a CUDA device; on a CPU pass --solutions-dir")
        return 2

    work = Path(tempfile.mkdtemp(prefix="judge_profile_"))
    os.environ["KERNELS_ENV_PROFILE_DIR"] = str(work / "prof")
    from kernels_env.client import SandboxClient
    from kernels_env.rules.config import JudgeConfig, SandboxConfig

    judge = JudgeConfig(policy=args.policy, baselines=["eager"])
    with SandboxClient(SandboxConfig(device=args.device, cache_dir=str(work / "cache"))) as sandbox:
        for task in [t for t in args.tasks.split(",") if t]:
            for i in range(args.repeat):
                res = sandbox.evaluate(
                    reference=str(args.tasks_dir / f"{task}.py"),
                    solution=str(args.solutions_dir / f"{task}.py"),
                    judge=judge,
                )
                print(f"{task} #{i}: {res['status']} {res.get('error') or ''}"[:300])
                print("  " + json.dumps(res.get("durations_s")))
    files = sorted((work / "prof").glob("evaluate-*.prof"))
    if not files:
        print("no profiles were written")
        return 1
    stats = pstats.Stats(str(files[0]), stream=io.StringIO())
    for f in files[1:]:
        stats.add(str(f))
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        stats.stream = out
        stats.sort_stats(key).print_stats(args.top)
        print(f"===== {len(files)} evaluate requests, by {key}")
        print("\n".join(line[:220] for line in out.getvalue().splitlines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
