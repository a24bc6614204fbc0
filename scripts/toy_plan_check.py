"""Why is a toy plan judged the way it is? For one task and a few plans: the sandbox's verdict with its
whole error text (check, mismatch, failed family), and the plan's ``ModelNew`` run directly against the
task's ``Model`` on the same weights and inputs (max abs / rel error, NaN and inf counts), outside the
judge. A plan the judge calls ``incorrect`` whose direct run agrees within the judge's tolerance points at
the judge's inputs (a family, a shape); one whose direct run disagrees points at the kernel (the renderer,
or the compiler: compare the rows-per-program / warps variants).

    python -m scripts.toy_plan_check --task toy0-4-00029 --device cuda --out check.json \\
        --plans "K gate log_softmax softplus amax R1 W8" "K gate log_softmax softplus amax R4 W8"
    python -m scripts.toy_plan_check --task toy0-4-00029 --device cpu --size 6,64 --out check.json

Without ``--plans``: the task's fused plan at R1/R2/R4 with 4 and 8 warps, and its corpus plan. On CPU the
direct run uses the Triton interpreter (set before triton is imported).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import types
from pathlib import Path


def _module(source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}.py"
    path.write_text(source)  # Triton's jit reads the function's source from its file
    exec(compile(source, str(path), "exec"), mod.__dict__)
    return mod


def direct_run(task, source: str, device: str, seed: int = 0) -> dict:
    """Model vs ModelNew on one input set: same seed for both constructions, inputs from get_inputs."""
    import torch

    # one file per source: Triton reads a kernel's source back from its file, through linecache
    tag = hashlib.sha1(source.encode()).hexdigest()[:12]
    ref, sol = _module(task.source, f"ref_{task.id}".replace("-", "_")), _module(source, f"plan_{tag}")
    init = ref.get_init_inputs()
    torch.manual_seed(seed)
    model = ref.Model(*init).to(device)
    torch.manual_seed(seed)
    new = sol.ModelNew(*init).to(device)
    torch.manual_seed(seed + 1)
    inputs = [x.to(device) for x in ref.get_inputs()]
    with torch.no_grad():
        want, got = model(*inputs), new(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    if got.shape != want.shape:
        return {"shape": list(got.shape), "expected_shape": list(want.shape)}
    want64, got64 = want.double().cpu(), got.double().cpu()
    diff = (want64 - got64).abs()
    finite = torch.isfinite(want64) & torch.isfinite(got64)
    rel = diff[finite] / want64[finite].abs().clamp_min(1e-12)
    worst = int(torch.where(finite, diff, -1.0).flatten().argmax()) if finite.any() else None
    return {
        "shape": list(got.shape),
        "max_abs_error": float(diff[finite].max()) if finite.any() else None,
        "max_rel_error": float(rel.max()) if rel.numel() else None,
        "within_1e-4": bool(torch.allclose(got64, want64, atol=1e-4, rtol=1e-4, equal_nan=True)),
        "nan": [int(torch.isnan(want64).sum()), int(torch.isnan(got64).sum())],
        "inf": [int(torch.isinf(want64).sum()), int(torch.isinf(got64).sum())],
        "worst": None
        if worst is None
        else {
            "index": worst,
            "expected": float(want64.flatten()[worst]),
            "got": float(got64.flatten()[worst]),
        },
    }


def _write(out: str, task, rows: list) -> None:
    from benchmarks._results import env_info, write_results

    write_results("toy_plan_check", {"env": env_info(), "command": " ".join(sys.argv), "task": task.id,
                                     "size": [task.rows, task.cols], "rows": rows}, out)  # fmt: skip


def default_plans(task) -> list[str]:
    from research.toyenv import baseline_plan, format_plan

    fused = [f"K {' '.join(task.ops)} R{r} W{w}" for r in (1, 2, 4) for w in (4, 8)]
    return [*fused, " ".join(format_plan(baseline_plan(task)))]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", required=True, help="a task id of make_tasks(ToyTaskConfig(decontam_dir=None))")
    p.add_argument("--plans", nargs="*", default=None)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--size", default=None, help="rows,cols (default: the task's own; cpu: 6 x cols of cpu_size)"
    )
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    from kernels_env.client import JudgeConfig, SandboxClient, SandboxConfig
    from research.toyenv import ToyTaskConfig, cpu_size, make_tasks, render_plan

    tasks = {t.id: t for t in make_tasks(ToyTaskConfig(decontam_dir=None)).tasks}
    if a.task not in tasks:
        sys.exit(f"toy_plan_check: no task {a.task!r} in the default task set ({len(tasks)} tasks)")
    task = tasks[a.task]
    if a.size:
        try:
            rows, cols = (int(x) for x in a.size.split(","))
        except ValueError:
            sys.exit(f"toy_plan_check: --size takes rows,cols (two integers), got {a.size!r}")
        task = task.at_size(rows, cols)
    elif a.device == "cpu":
        task = cpu_size(task)
    plans = a.plans or default_plans(task)
    rows_out = []
    judge_cfg = JudgeConfig(baselines=["eager"])  # tests/toyenv/test_gpu.py's judge
    with SandboxClient(SandboxConfig(device=a.device)) as sb:
        for plan in plans:
            row: dict = {"plan": plan}
            try:
                source = render_plan(task, plan)
            except Exception as exc:  # not a plan for the task: say so, check the others
                rows_out.append({**row, "render_error": str(exc)})
                print(f"{plan}: not a plan for the task: {exc}", flush=True)
                _write(a.out, task, rows_out)
                continue
            res = sb.submit(task.source, source, judge_cfg, problem="toy", solution_name="plan").result()
            corr = res.get("correctness") or {}
            row["verdict"] = {
                "status": res.get("status"),
                "error": res.get("error"),
                "check": res.get("check"),
                "mismatch": corr.get("mismatch"),
                "families": corr.get("families"),
                "speedups": res.get("speedups"),
            }
            try:
                row["direct"] = direct_run(task, source, a.device)
            except Exception as exc:  # the direct run failing is itself the finding
                row["direct"] = {"error": f"{type(exc).__name__}: {exc}"}
            rows_out.append(row)
            d = row["direct"]
            print(
                f"{plan}: {row['verdict']['status']} | direct max abs {d.get('max_abs_error')} rel "
                f"{d.get('max_rel_error')} within 1e-4 {d.get('within_1e-4')} | {row['verdict']['error']}",
                flush=True,
            )
            _write(a.out, task, rows_out)


if __name__ == "__main__":
    main()
