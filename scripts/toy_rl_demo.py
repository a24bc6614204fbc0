"""The command line of issue 14's GPU learning demonstration (``scripts/gpu_toy_rl.sh``; the library side is
``research.rl.pipeline.demo``: configs, runs, results, plots):

    python -m scripts.toy_rl_demo --out $OUT --work /tmp/toy_rl --budget-s 540
    python -m scripts.toy_rl_demo --out $OUT --standalone --ablations no_rft          # no full run
    python -m scripts.toy_rl_demo --out $OUT --after-full                            # ablations only

A SIGTERM (an outer timeout) stops it after writing what finished; a wrong invocation is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from research.rl.pipeline.demo import ABLATIONS, DemoConfig, on_sigterm, run_demo


def parse(argv: list[str]) -> DemoConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/gpu_toy_rl")
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--ablations", default=",".join(ABLATIONS))
    p.add_argument("--standalone", action="store_true", help="no full run: each ablation from scratch")
    p.add_argument(
        "--after-full", action="store_true", help="the full run is in --work already: ablations only"
    )
    p.add_argument("--warmup-steps", type=int, default=None, help="warm-up steps (default: the demo's)")
    p.add_argument("--warmup-lr", type=float, default=None, help="warm-up actor lr (default: the demo's)")
    a = p.parse_args(argv)
    return DemoConfig(
        out=a.out,
        work=a.work,
        budget_s=a.budget_s,
        ablations=[x for x in a.ablations.split(",") if x],
        standalone=a.standalone,
        after_full=a.after_full,
        warmup_steps=a.warmup_steps,
        warmup_lr=a.warmup_lr,
        command=" ".join(["python -m scripts.toy_rl_demo", *argv]),
    )


def main(argv: list[str] | None = None) -> None:
    cfg = parse(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, on_sigterm)  # an outer timeout still leaves results.json
    try:
        res = run_demo(cfg)
    except (ValueError, FileNotFoundError) as exc:  # a wrong invocation: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps({k: res.get(k) for k in ("target", "elapsed_s")}, indent=2, default=str))


if __name__ == "__main__":
    main()
