"""Latency of every agent tool as the agent calls it (issue 13), recorded with GPU, versions and date.

One workspace session on a level-1 task (``examples/problems/1_relu.py``), the agent's own tool layer
(``research.agent.tools.ToolBox``: the same dispatch, argument checks, rendering and truncation an episode
uses), and an agent's sequence of calls, repeated: ``list_files``, ``read_file``, ``write_file`` (the
solution), ``edit_file`` (a comment: a changed source, so the next ``compile`` builds it again),
``compile``, ``verify``, ``benchmark``, ``profile``, ``sanitize``, ``roofline``, ``skill``, ``submit``.
``--think-s`` between calls
stands in for the policy's generation (a pre-started profiling process gets ready meanwhile, as in an
episode). Reported per tool: the first call (cold: worker imports, first build, baselines), and the median
and max of the later ones; whether each call succeeded.

    python -m benchmarks.rl.agent_tools                  # GPU (runs/benchmarks/agent_tools.json)
    python -m benchmarks.rl.agent_tools --smoke --out /tmp/at.json  # CPU: file tools, compile, verify
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._results import default_path, write_results
from benchmarks.sandbox.tool_latency import environment
from kernels_env.client import JudgeConfig, SandboxClient, SandboxConfig
from kernels_env.session import WorkspaceSession
from research.agent import SkillLibrary
from research.agent.actions import ToolCall
from research.agent.tools import ToolBox

ROOT = Path(__file__).resolve().parents[2]

PROBLEM = ROOT / "examples" / "problems" / "1_relu.py"
SOLUTIONS = {
    "cuda": ROOT / "examples/solutions/1_relu__cuda.py",
    "triton": ROOT / "examples/solutions/1_relu__triton.py",
}
GPU_ONLY = ("benchmark", "profile", "sanitize", "roofline")  # CPU mode: nothing to time, profile or sanitize


def calls(solution: str, repeat: int, cuda: bool) -> list[tuple[str, dict]]:
    """One pass of an agent's calls; the edit changes a comment, so each pass compiles a new source."""
    seq = [
        ("list_files", {}),
        ("read_file", {"path": "model.py"}),
        ("write_file", {"path": "model_new.py", "content": solution}),
        (
            "edit_file",
            {"path": "model_new.py", "old": "import torch\n", "new": f"import torch  # pass {repeat}\n"},
        ),
        ("compile", {}),
        ("verify", {}),
        ("benchmark", {}),
        ("profile", {}),
        ("sanitize", {"tools": "memcheck"}),
        ("roofline", {}),
        ("skill", {"query": "vectorised loads for an elementwise kernel"}),
        ("submit", {}),
    ]
    return [c for c in seq if cuda or c[0] not in GPU_ONLY]


def summarise(rows: list[dict]) -> dict:
    out = {}
    for name in dict.fromkeys(r["tool"] for r in rows):
        mine = [r for r in rows if r["tool"] == name]
        later = [r["wall_s"] for r in mine[1:]]
        out[name] = {
            "first_s": mine[0]["wall_s"],
            "median_s": round(statistics.median(later), 4) if later else None,
            "max_s": max(later) if later else None,
            "calls": len(mine),
            "ok": sum(r["ok"] for r in mine),
        }
    return out


def finish(record: dict, rows: list[dict], out: str) -> None:
    """The calls so far, their summary and the profile target, written to ``out``."""
    record["calls"] = rows
    record["summary"] = summarise(rows)
    prof = record["summary"].get("profile", {})
    record["profile_under_4s"] = prof.get("median_s") is not None and prof["median_s"] < 4.0
    write_results("agent_tools", record, out)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="results JSON (default: runs/benchmarks/)")
    ap.add_argument("--smoke", action="store_true", help="CPU sandbox, 2 passes, no think time")
    ap.add_argument("--kernel", choices=sorted(SOLUTIONS), default="cuda")
    ap.add_argument("--repeats", type=int, default=4, help="passes over the tools (the first is cold)")
    ap.add_argument("--think-s", type=float, default=3.0, help="pause between calls (the policy's turn)")
    a = ap.parse_args(argv)
    a.out = a.out or str(default_path("agent_tools"))
    repeats, think = (2, 0.0) if a.smoke else (a.repeats, a.think_s)
    sandbox = SandboxConfig(
        device="cpu" if a.smoke else "cuda",
        cache_dir=tempfile.mkdtemp(prefix="agent_tools_cache_"),
        num_compile_workers=1 if a.smoke else 4,
        standby_run_workers=not a.smoke,
    )
    # The agent's verify/benchmark judge: the protocol's trials and families (benchmark: timed, eager and
    # torch.compile baselines); smoke: 2 trials, no families, so CPU mode stays quick.
    judge = JudgeConfig(num_trials=2, families=[]) if a.smoke else JudgeConfig()
    solution = SOLUTIONS["triton" if a.smoke else a.kernel].read_text()
    record = {"benchmark": "agent_tools", "smoke": a.smoke, "kernel": a.kernel, "think_s": think}
    record["environment"] = environment()
    rows = []
    with SandboxClient(sandbox, judge) as sb:
        t0 = time.perf_counter()
        sb.start()
        print(f"sandbox started in {time.perf_counter() - t0:.1f} s on {sb.device}", flush=True)
        cuda = sb.device == "cuda"
        with WorkspaceSession(PROBLEM, client=sb) as ws:
            box = ToolBox(ws, judge, SkillLibrary())
            for rep in range(repeats):
                for i, (name, args) in enumerate(calls(solution, rep, cuda)):
                    t = time.perf_counter()
                    res = box.run(ToolCall(f"{rep}-{i}", name, json.dumps(args)))
                    row = {
                        "pass": rep,
                        "tool": name,
                        "wall_s": round(time.perf_counter() - t, 4),
                        "ok": res.ok,
                    }
                    if not res.ok:
                        row["text"] = res.text[:300]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    finish(record, rows, a.out)  # after every call: an outer timeout keeps what finished
                    time.sleep(think)
    finish(record, rows, a.out)
    for name, s in record["summary"].items():
        print(
            f"{name:<11} first {s['first_s']:>8.3f} s  median {s['median_s'] or 0:>8.3f} s  "
            f"ok {s['ok']}/{s['calls']}"
        )
    print(f"wrote {a.out}")
    return record


if __name__ == "__main__":
    main()
