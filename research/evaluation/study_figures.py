"""What a researcher looks at after the learning study (docs/study_protocol.md): each run's dev/test rates
with bootstrap CIs over tasks, the paired difference full - sft per seed and pooled, the training curves of
every stage, and one markdown table of the same numbers (``notebooks/study_report.py``).

A study directory is the layout ``scripts/gpu_study.sh`` writes: ``results/*.json`` (``study-results/1``, one
file per run x split x seed, read by ``RunResults.load``) and ``runs/<run>/<stage>/metrics.jsonl`` (the
pipeline's ``MetricsWriter``) with ``runs/<run>/pipeline.json``. A run named ``<kind>-s<seed>`` (``full-s0``)
is seed ``seed`` of ``kind`` (``sft``, ``full`` or an ablation). The numbers come from ``stats`` (``mean_ci``)
and ``paired`` (``pair_runs``, ``compare``); this module only groups, draws and formats them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from . import stats, style
from .ablations import read_jsonl_rows
from .paired import ResultsError, RunResults, compare, pair_runs

METRICS = ("pass", "faster_than_eager", "faster_than_compile")  # paired.BINARY in reading order
CURVE_KEYS = ("reward_mean", "pass_rate")
# research.rl.pipeline.config.STAGES, not imported: it loads jax
STAGE_ORDER = ("sft", "warmup", "rft", "value", "ppo")
SPLIT_ORDER = ("dev", "test_seen", "test_heldout", "kernelbench_l1")
BASE_KINDS = ("sft", "full")


class StudyReportError(ValueError):
    """A study directory that cannot be reported (one line: which directory or file)."""


def run_kind(name: str) -> tuple[str, str]:
    """(kind, seed) of a run name: ``full-s0`` -> (``full``, ``0``); a name without ``-s<n>``: (name, "")."""
    m = re.fullmatch(r"(.+)-s(\d+)", name)
    return (m.group(1), m.group(2)) if m else (name, "")


def _kind_order(kinds) -> list[str]:
    return [k for k in BASE_KINDS if k in kinds] + sorted(k for k in kinds if k not in BASE_KINDS)


def _split_order(splits) -> list[str]:
    return [s for s in SPLIT_ORDER if s in splits] + sorted(s for s in splits if s not in SPLIT_ORDER)


def load_study(study_dir: str | Path) -> dict[tuple[str, str], RunResults]:
    """{(kind, split): the kind's results on the split, every seed's rows in one ``RunResults``}."""
    root = Path(study_dir)
    if not root.is_dir():
        raise StudyReportError(f"no study directory at {root}")
    files = sorted((root / "results").glob("*.json"))
    if not files:
        raise StudyReportError(
            f"{root}: no results (results/*.json): evaluate the runs first (python -m experiments.study "
            "study.mode=eval ... study.results=STUDY_DIR/results/RUN.SPLIT.json)"
        )
    rows: dict[tuple[str, str], list] = defaultdict(list)
    sha: dict[tuple[str, str], set] = defaultdict(set)
    for f in files:
        run = RunResults.load(f)
        key = (run_kind(run.run)[0], run.split)
        rows[key] += run.results
        sha[key].add(run.protocol_sha256)
    out = {}
    for (kind, split), rs in rows.items():
        if len(sha[(kind, split)] - {None}) > 1:
            raise StudyReportError(
                f"{root}: runs of {kind} on {split} were evaluated under different protocols"
            )
        merged = RunResults(kind, split, rs, next(iter(sha[(kind, split)] - {None}), None))
        merged.grid()  # one greedy row per task and seed, the same tasks for every seed (one-line error)
        out[(kind, split)] = merged
    return out


def _seed(run: RunResults, seeds: list[int]) -> RunResults:
    keep = set(seeds)
    return RunResults(run.run, run.split, [r for r in run.results if r.seed in keep], run.protocol_sha256)


def _matrix(run: RunResults, metric: str) -> list[list[float]] | None:
    """(n_tasks, n_seeds) of a binary metric; None when any value is null (no comparable timing)."""
    tasks, seeds, cells = run.grid()
    vals = [[cells[(t, s)].to_dict()[metric] for s in seeds] for t in tasks]
    if any(v is None for row in vals for v in row):
        return None
    return [[float(v) for v in row] for row in vals]


def rate_rows(study: dict[tuple[str, str], RunResults], n_boot: int = 10000, seed: int = 0) -> list[dict]:
    """Per (split, kind) one row per seed and, with several seeds, a pooled row (each task's mean over the
    seeds, tasks resampled): each metric's mean with its 95% bootstrap CI over tasks, or None (n/a)."""
    out = []
    for split in _split_order({s for _, s in study}):
        for kind in _kind_order({k for k, s in study if s == split}):
            run = study[(kind, split)]
            tasks, seeds, _ = run.grid()
            groups = [(str(s), [s]) for s in seeds] + ([("pooled", seeds)] if len(seeds) > 1 else [])
            for label, ss in groups:
                row: dict[str, Any] = {"split": split, "kind": kind, "seed": label, "n_tasks": len(tasks)}
                for m in METRICS:
                    x = _matrix(_seed(run, ss), m)
                    row[m] = None if x is None else stats.mean_ci(x, n_boot, seed)
                out.append(row)
    return out


def delta_rows(
    study: dict[tuple[str, str], RunResults],
    a: str = "full",
    b: str = "sft",
    n_boot: int = 10000,
    seed: int = 0,
) -> list[dict]:
    """Per split holding both kinds: ``compare`` of a vs b paired by task, per seed both have and pooled
    over those seeds (with several): per metric the rates, the difference a - b with its bootstrap CI and
    McNemar's p (None: n/a)."""
    out = []
    for split in _split_order({s for _, s in study}):
        if (a, split) not in study or (b, split) not in study:
            continue
        ra, rb = study[(a, split)], study[(b, split)]
        common = sorted(set(ra.grid()[1]) & set(rb.grid()[1]))
        groups = [(str(s), [s]) for s in common] + ([("pooled", common)] if len(common) > 1 else [])
        for label, ss in groups:
            rep = compare(pair_runs(_seed(ra, ss), _seed(rb, ss)), n_boot=n_boot, seed=seed)
            row: dict[str, Any] = {"split": split, "a": a, "b": b, "seed": label, "n_tasks": rep["n_tasks"]}
            for m in METRICS:
                r = rep["metrics"][m]
                row[m] = (
                    None
                    if r is None
                    else {
                        "a": r["a"]["rate"],
                        "b": r["b"]["rate"],
                        **{k: r["diff"][k] for k in ("diff", "lo", "hi")},
                        "p": r["mcnemar"]["p"],
                    }
                )
            out.append(row)
    return out


def _stage_key(stage: str) -> tuple[int, str]:
    return (STAGE_ORDER.index(stage), stage) if stage in STAGE_ORDER else (len(STAGE_ORDER), stage)


def training_curves(study_dir: str | Path) -> dict[str, Any]:
    """{"curves": {stage: {run: {key: [(step, value), ...]}}}, "runs": {run: {"stages": {stage: last row
    (step and CURVE_KEYS)}, "skipped": {stage: why}, "truncated"}}} from ``runs/*/``; a stage without
    metrics.jsonl (skipped, not reached) is simply absent."""
    curves: dict[str, dict] = defaultdict(dict)
    runs: dict[str, Any] = {}
    for rd in sorted(p for p in (Path(study_dir) / "runs").glob("*") if p.is_dir()):
        pipe = rd / "pipeline.json"
        summary = json.loads(pipe.read_text()) if pipe.is_file() else {}
        info: dict[str, Any] = {
            "stages": {},
            "skipped": summary.get("skipped") or {},
            "truncated": bool(summary.get("truncated")),
        }
        for mf in sorted(rd.glob("*/metrics.jsonl")):
            rows = read_jsonl_rows(mf)
            got = {
                k: [(int(r["step"]), float(r[k])) for r in rows if isinstance(r.get(k), int | float)]
                for k in CURVE_KEYS
            }
            got = {k: v for k, v in got.items() if v}
            if got:
                curves[mf.parent.name][rd.name] = got
            if rows:
                info["stages"][mf.parent.name] = {"step": rows[-1]["step"]} | {
                    k: rows[-1].get(k) for k in CURVE_KEYS
                }
        info["stages"] = {s: info["stages"][s] for s in sorted(info["stages"], key=_stage_key)}
        runs[rd.name] = info
    return {"curves": {s: curves[s] for s in sorted(curves, key=_stage_key)}, "runs": runs}


def _ci(d: dict | None, key: str, signed: bool = False) -> str:
    if d is None:
        return "n/a"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(d[key])} [{f.format(d['lo'])}, {f.format(d['hi'])}]"


def format_markdown(report: dict[str, Any]) -> str:
    n_boot = report["n_boot"]
    lines = [
        f"# Study report: {report['study_dir']}",
        "",
        f"Rates: mean over tasks, 95% percentile bootstrap CI over tasks ({n_boot} resamples); `pooled`: "
        "each task's mean over the seeds, then tasks resampled. n/a: no comparable timing (CPU mode).",
        "",
        "## Rates per run",
        "",
        "| split | run | seed | tasks | " + " | ".join(METRICS) + " |",
        "|---|---|---|---|" + "---|" * len(METRICS),
    ]
    for r in report["rates"]:
        cells = " | ".join(_ci(r[m], "mean") for m in METRICS)
        lines.append(f"| {r['split']} | {r['kind']} | {r['seed']} | {r['n_tasks']} | {cells} |")
    lines += ["", f"## Paired difference {report['a']} - {report['b']}", ""]
    if report["deltas"]:
        lines += [
            "Per task (same tasks, same seed); 95% paired bootstrap CI; McNemar's exact p in parentheses.",
            "",
            "| split | seed | tasks | " + " | ".join(METRICS) + " |",
            "|---|---|---|" + "---|" * len(METRICS),
        ]
        for r in report["deltas"]:
            cells = " | ".join(
                "n/a" if r[m] is None else f"{_ci(r[m], 'diff', True)} (p {r[m]['p']:.3g})" for m in METRICS
            )
            lines.append(f"| {r['split']} | {r['seed']} | {r['n_tasks']} | {cells} |")
    else:
        lines.append(f"no split has both {report['a']} and {report['b']} results")
    lines += ["", "## Training (last step of each stage)", ""]
    runs = report["training"]["runs"]
    if not runs:
        lines.append("no training runs (runs/*/) in the study directory")
    else:
        lines += ["| run | stage | steps | " + " | ".join(CURVE_KEYS) + " |", "|---|---|---|" + "---|" * 2]
        fmt = lambda v: "-" if not isinstance(v, int | float) else f"{v:.3f}"  # noqa: E731
        for name, info in runs.items():
            for stage, last in info["stages"].items():
                cells = " | ".join(fmt(last.get(k)) for k in CURVE_KEYS)
                lines.append(f"| {name} | {stage} | {last['step']} | {cells} |")
            for stage, why in info["skipped"].items():
                lines.append(f"| {name} | {stage} | skipped: {why} | - | - |")
            if not info["stages"] and not info["skipped"]:
                lines.append(f"| {name} | - | no metrics.jsonl | - | - |")
    return "\n".join(lines) + "\n"


def _colors(kinds) -> dict[str, str]:
    return {k: style.PALETTE[i % len(style.PALETTE)] for i, k in enumerate(_kind_order(kinds))}


def rates_figure(rates: list[dict], split: str):
    """One panel per metric: each run's seeds (circles) and pooled (diamond) with 95% CIs, grouped by kind."""
    rows = [r for r in rates if r["split"] == split]
    colors = _colors({r["kind"] for r in rows})
    fig, axes = style.figure(1, len(METRICS), height=3.2)
    for ax, m in zip(axes[0], METRICS):
        ax.set_title(f"{m} on {split}")
        pts = [(i, r) for i, r in enumerate(rows) if r[m] is not None]
        for i, r in pts:
            d = r[m]
            ax.errorbar(
                [i],
                [d["mean"]],
                yerr=[[d["mean"] - d["lo"]], [d["hi"] - d["mean"]]],
                color=colors[r["kind"]],
                marker="D" if r["seed"] == "pooled" else "o",
                capsize=3,
                ls="none",
            )
        if not pts:
            style.note(ax, f"{m}: n/a\n(no comparable timing)")
            continue
        ax.set_xticks(range(len(rows)), [f"{r['kind']}\n{r['seed']}" for r in rows], fontsize=7)
        ax.set_ylim(-0.03, 1.03)
    axes[0][0].set_ylabel("rate (95% bootstrap CI over tasks)")
    return fig


def delta_figure(deltas: list[dict], split: str):
    """One panel per metric: a - b per seed and pooled with the paired bootstrap CI; 0 marked."""
    rows = [r for r in deltas if r["split"] == split]
    fig, axes = style.figure(1, len(METRICS), height=3.0)
    for ax, m in zip(axes[0], METRICS):
        ax.set_title(f"{m}: {rows[0]['a']} - {rows[0]['b']}" if rows else m)
        pts = [(i, r[m]) for i, r in enumerate(rows) if r[m] is not None]
        if not pts:
            style.note(ax, f"{m}: n/a\n(no comparable timing)")
            continue
        for i, d in pts:
            pooled = rows[i]["seed"] == "pooled"
            ax.errorbar(
                [i],
                [d["diff"]],
                yerr=[[d["diff"] - d["lo"]], [d["hi"] - d["diff"]]],
                color=style.PALETTE[1 if pooled else 0],
                marker="D" if pooled else "o",
                capsize=3,
                ls="none",
            )
        ax.axhline(0.0, color="0.4", lw=0.8)
        ax.set_xticks(
            range(len(rows)), [r["seed"] if r["seed"] == "pooled" else f"s{r['seed']}" for r in rows]
        )
    axes[0][0].set_ylabel(f"difference on {split} (95% CI)")
    return fig


def curves_figure(stage_curves: dict[str, dict], stage: str):
    """One panel per CURVE_KEYS: a line per run (colour: kind, line style: seed)."""
    colors = _colors({run_kind(r)[0] for r in stage_curves})
    seeds = sorted({run_kind(r)[1] for r in stage_curves})
    dashes = ("-", "--", ":", "-.")
    fig, axes = style.figure(1, len(CURVE_KEYS), height=3.0)
    for ax, key in zip(axes[0], CURVE_KEYS):
        ax.set_title(f"{stage}: {key}")
        drawn = False
        for run, got in stage_curves.items():
            if key not in got:
                continue
            kind, s = run_kind(run)
            xs, ys = zip(*got[key])
            ax.plot(
                xs,
                ys,
                color=colors[kind],
                ls=dashes[seeds.index(s) % len(dashes)],
                label=run,
                marker=style.marker(len(xs)),
            )
            drawn = True
        if not drawn:
            style.note(ax, f"no {key} in the {stage} stage's metrics")
            continue
        ax.set_xlabel("step")
        style.integer_ticks(ax, "x")
        style.legend_below(ax)
    return fig


def study_report(
    study_dir: str | Path,
    out_dir: str | Path | None = None,
    a: str = "full",
    b: str = "sft",
    n_boot: int = 10000,
    seed: int = 0,
) -> dict[str, Any]:
    """Every table and figure of a study directory into ``out_dir`` (default ``<study_dir>/report``):
    ``study_report.md``, ``study_report.json``, ``rates_<split>``, ``delta_<split>``, ``curves_<stage>``
    (PDF + PNG). Returns the report with ``"paths"``."""
    study = load_study(study_dir)
    out = Path(out_dir) if out_dir else Path(study_dir) / "report"
    rep: dict[str, Any] = {
        "study_dir": str(study_dir),
        "a": a,
        "b": b,
        "n_boot": n_boot,
        "seed": seed,
        "rates": rate_rows(study, n_boot, seed),
        "deltas": delta_rows(study, a, b, n_boot, seed),
        "training": training_curves(study_dir),
    }
    paths: list[Path] = []
    for split in _split_order({r["split"] for r in rep["rates"]}):
        paths += style.save(rates_figure(rep["rates"], split), out / f"rates_{split}")
    for split in _split_order({r["split"] for r in rep["deltas"]}):
        paths += style.save(delta_figure(rep["deltas"], split), out / f"delta_{split}")
    for stage, data in rep["training"]["curves"].items():
        paths += style.save(curves_figure(data, stage), out / f"curves_{stage}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "study_report.md").write_text(format_markdown(rep))
    (out / "study_report.json").write_text(json.dumps(rep, indent=1))
    rep["paths"] = [*paths, out / "study_report.md", out / "study_report.json"]
    return rep


__all__ = ["ResultsError", "StudyReportError", "load_study", "run_kind", "study_report"]
