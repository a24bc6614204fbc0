"""The paper's Table 1 per level: pass rate, faster than eager / torch.compile (shares of ALL tasks, ">5%
faster" as in CUDA Agent's reward), geometric-mean speedups over correct solutions only.

The arithmetic is the sandbox's own KernelBench-style summary (``kernels_env.client.summarize``: fast_p,
faster-than shares, geomeans, pass rates), applied to each level's episode results; this module only picks
its columns. ``pass_rate`` is the summary's "per problem, mean" pass rate; ``pass_rates`` holds all three,
labelled (docs/sandbox.md "How a run is scored"). A row marked ``missing`` (a task of the set without a
result: ``research.evaluation.table1.missing_tasks``) is a task that counts as failed, never a solution.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from kernels_env.client import format_pass_rate, summarize

MISSING = "missing"  # marks a row standing for a task without a result (it has no solution to count)


def _verdict(i: int, r: dict[str, Any]) -> dict[str, Any]:
    """An episode result in the shape of a sandbox verdict, as the summary reads it."""
    return {
        "problem": str(r.get("task", i)),
        "status": r.get("status"),
        "reward": r.get("reward"),
        "speedups": r.get("speedups") or {},
        "timings": {"comparable": bool(r.get("comparable")), "speed_of_light": r.get("speed_of_light")},
    }


MODES = ("eager", "compile")


def _row(results: list[dict[str, Any]], modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    verdicts = [_verdict(i, r) for i, r in enumerate(results)]
    judged = [v for v, r in zip(verdicts, results) if not r.get(MISSING)]
    s = summarize(judged, [v["problem"] for v in verdicts])
    rates = s["pass_rate"]
    # "tasks": distinct tasks, the shares' denominator (a task with several results weighs 1; tasks whose
    # results are all not_run leave it); "results": all rows
    row: dict[str, Any] = {
        "tasks": s["num_problems"],
        "results": len(results),
        "pass_rate": rates["per_problem_mean"],
        "pass_rate_best_of": rates["per_problem_best_of"],
        "pass_rate_per_solution": rates["per_solution"],
        "pass_rates": rates,
        "comparable": s["comparable"],
    }
    for mode in modes:
        row[f"faster_than_{mode}"] = s["faster_than"].get(mode) if s["comparable"] else None
        row[f"geomean_vs_{mode}"] = s["geomean_speedup"].get(mode)
    # achieved fraction of the roofline floor over correct solutions (kernels_env.rules.speed_of_light)
    sol = s["speed_of_light"]
    row["speed_of_light_median"], row["speed_of_light_geomean"] = sol["median"], sol["geomean"]
    row["speed_of_light_count"], row["speed_of_light_reason"] = sol["count"], sol["reason"]
    row["mean_reward"] = s["mean_reward"]
    row["status_counts"] = dict(sorted(Counter(str(v["status"]) for v in verdicts).items()))
    row["end_reasons"] = dict(sorted(Counter(str(r.get("end_reason")) for r in results).items()))
    return row


def table1(results: list[dict[str, Any]], modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """{"overall": row, "levels": {level: row}} over one result per task (several results of one task: the
    task weighs 1, the mean over them). ``not_run`` results (CPU mode) leave the shares; speed columns are
    None without comparable timings. ``modes``: the baselines with faster-than and geomean columns."""
    levels: dict[str, list] = defaultdict(list)
    for r in results:
        levels[str(r.get("level", "all"))].append(r)
    return {"overall": _row(results, modes), "levels": {k: _row(v, modes) for k, v in sorted(levels.items())}}


def format_table1(summary: dict[str, Any]) -> str:
    fmt = lambda v: "n/a" if v is None else (f"{v:.1%}" if isinstance(v, float) else str(v))  # noqa: E731
    gm = lambda v: "n/a" if v is None else f"{v:.2f}x"  # noqa: E731
    head = f"{'subset':<10}{'tasks':>6}{'pass':>8}{'>eager':>8}{'>compile':>9}{'gm eager':>9}{'gm comp':>9}"
    lines = [head]
    for name, row in [("overall", summary["overall"]), *summary["levels"].items()]:
        lines.append(
            f"{('L' + name) if name.isdigit() else name:<10}{row['tasks']:>6}"
            f"{fmt(row['pass_rate']):>8}{fmt(row['faster_than_eager']):>8}{fmt(row['faster_than_compile']):>9}"
            f"{gm(row['geomean_vs_eager']):>9}{gm(row['geomean_vs_compile']):>9}"
        )
    lines.append(format_pass_rate(summary["overall"]["pass_rates"]))
    return "\n".join(lines)
