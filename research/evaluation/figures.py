"""The report figures, drawn from the tables of this package (never from numbers of their own), in the
project style (``style``), each saved as PDF and PNG. ``make_figures(run_dir)`` draws every figure a run
directory has the files for (``python -m experiments.figures run_dir=...``; the notebooks call the same
functions)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import style
from .ablations import CURVES, ablation_table, collect, curves
from .audit import read_audit
from .claims import SURVIVES, claims_table
from .labels import level_label
from .sweeps import is_evaluation_sweep, protocol_table
from .table1 import format_table1_report, load_results, run_tasks, table1_report


def table1_figure(report: dict[str, Any]):
    """Bars per level: pass rate and faster-than shares (full set; the audited subset hatched); a share not
    measured (CPU mode: no timings) reads "n/a" where its bar would be."""
    fig, axes = style.figure()
    ax = axes[0][0]
    rates = report["full"]["overall"]["pass_rates"]
    cols = [("pass_rate", f"pass, {rates['labels']['per_problem_mean']}")]
    if rates["solutions_per_problem"][1] > 1:  # else best-of is the mean
        cols.append(("pass_rate_best_of", f"pass, {rates['labels']['per_problem_best_of']}"))
    cols += [(f"faster_than_{m}", f"> {m}") for m in ("eager", "compile")]
    tables = [("full", report["full"], None)] + (
        [("audited", report["audited"], "//")] if report["audited"] else []
    )
    levels = ["overall", *report["full"]["levels"]]
    width = 0.8 / (len(cols) * len(tables))
    i = 0
    for name, table, hatch in tables:
        for j, (key, label) in enumerate(cols):
            raw = [
                (table["overall"] if lv == "overall" else table["levels"].get(lv, {})).get(key)
                for lv in levels
            ]
            vals = [v or 0.0 for v in raw]
            xs = [k + (i - (len(cols) * len(tables) - 1) / 2) * width for k in range(len(levels))]
            ax.bar(
                xs,
                vals,
                width,
                label=f"{label} ({name})",
                color=style.PALETTE[j],
                hatch=hatch,
                alpha=1.0 if hatch is None else 0.6,
            )
            for x, v in zip(xs, raw):
                if v is None:  # not measured (CPU mode): say so instead of drawing a zero
                    ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
            i += 1
    ax.set_xticks(range(len(levels)), [level_label(lv) for lv in levels])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of all tasks")
    lab = report["labels"]
    ax.set_title(
        f"Table 1 · {lab['gpu']} · torch {lab['torch']} · {lab['protocol']}/{lab['policy']}", fontsize=8
    )
    style.legend_below(ax, ncol=3)
    return fig


def plot_table1(report: dict[str, Any], stem: str | Path) -> list[Path]:
    return style.save(table1_figure(report), stem)


def claims_figure(table: dict[str, Any]):
    """Left: outcome of every claim per source (stacked counts); right: claimed vs measured speedups (a note
    when no claim has a comparable measurement, e.g. CPU mode)."""
    fig, axes = style.figure(1, 2)
    ax, sc = axes[0]
    rows = table["rows"]
    sources = sorted({str(r["source"]) for r in rows})
    classes = sorted({r["outcome"] for r in rows}, key=lambda c: (c != SURVIVES, c))
    counts = {s: Counter(r["outcome"] for r in rows if str(r["source"]) == s) for s in sources}
    bottom = [0] * len(sources)
    for k, cls in enumerate(classes):
        vals = [counts[s][cls] for s in sources]
        ax.bar(sources, vals, bottom=bottom, label=cls, color=style.PALETTE[k % len(style.PALETTE)])
        bottom = [b + v for b, v in zip(bottom, vals)]
    if not rows:
        style.note(ax, "no claims in this set")
    ax.set_ylabel("claims")
    style.integer_ticks(ax, "y")
    ax.set_title("claim outcomes per source")
    style.legend_below(ax, ncol=2)
    pairs = [r for r in rows if r["measured"] is not None]
    if pairs:
        for k, s in enumerate(sources):
            mine = [r for r in pairs if str(r["source"]) == s]
            sc.scatter(
                [r["claimed"] for r in mine],
                [r["measured"] for r in mine],
                s=12,
                label=s,
                color=style.PALETTE[k % len(style.PALETTE)],
            )
        lo = min(min(r["claimed"], r["measured"]) for r in pairs) * 0.8
        hi = max(max(r["claimed"], r["measured"]) for r in pairs) * 1.25
        sc.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
        sc.set_xscale("log")
        sc.set_yscale("log")
        sc.set_xlabel("claimed speedup")
        sc.set_ylabel("measured speedup")
        style.legend_below(sc, ncol=3)
    else:
        style.note(sc, "no comparable timings\n(CPU mode: correctness only)")
    return fig


def plot_claims(table: dict[str, Any], stem: str | Path) -> list[Path]:
    return style.save(claims_figure(table), stem)


def audit_figure(reports: list[dict[str, Any]]):
    """Problems per flag kind and tolerance, and the audit's status counts."""
    fig, axes = style.figure(1, 2)
    ax, st = axes[0]
    kinds: dict[str, Counter] = defaultdict(Counter)
    for r in reports:
        for f in {(f["kind"], f.get("tolerance")) for f in r.get("flags") or []}:
            kinds[f[0]][f[1]] += 1
    tols = sorted({t for c in kinds.values() for t in c}, key=lambda t: (t is None, t or 0))
    names = sorted(kinds)
    width = 0.8 / max(len(tols), 1)
    for k, t in enumerate(tols):
        ax.barh(
            [i + k * width for i in range(len(names))],
            [kinds[n][t] for n in names],
            width,
            label="any tolerance" if t is None else f"tol {t:g}",
            color=style.PALETTE[k],
        )
    if names:
        ax.set_yticks([i + width * (len(tols) - 1) / 2 for i in range(len(names))], names)
        ax.set_xlabel("problems flagged")
        style.integer_ticks(ax, "x")
        style.legend_below(ax, ncol=3)
    else:
        style.note(ax, f"no problem flagged\n({len(reports)} audited)")
    status = Counter(r.get("status") for r in reports)
    st.bar([str(s) for s in status], list(status.values()), color=style.PALETTE[0])
    st.set_ylabel("problems")
    style.integer_ticks(st, "y")
    st.set_title(f"{len(reports)} problems audited")
    if not reports:
        style.note(st, "no problems in the audit")
    return fig


def plot_audit(reports: list[dict[str, Any]], stem: str | Path) -> list[Path]:
    return style.save(audit_figure(reports), stem)


def ablations_figure(table: dict[str, Any], metric: str):
    """Mean +- std of ``metric`` per ablation over seeds, each seed a dot; failed points in the label."""
    fig, axes = style.figure()
    ax = axes[0][0]
    names = list(table["ablations"])
    means = [table["ablations"][n][metric]["mean"] for n in names]
    stds = [table["ablations"][n][metric]["std"] or 0.0 for n in names]
    ax.bar(
        range(len(names)), [m or 0.0 for m in means], yerr=stds, color=style.PALETTE[0], alpha=0.7, capsize=3
    )
    for i, n in enumerate(names):
        ys = [
            r[metric]
            for r in table["rows"]
            if r["ablation"] == n and r["status"] != "failed" and isinstance(r.get(metric), int | float)
        ]
        ax.scatter([i] * len(ys), ys, color="black", s=8, zorder=3)
    labels = [
        n + (f"\n({table['ablations'][n]['failed']} failed)" if table["ablations"][n]["failed"] else "")
        for n in names
    ]
    ax.set_xticks(range(len(names)), labels, rotation=20)
    ax.set_ylabel(metric)
    return fig


def plot_ablations(table: dict[str, Any], metric: str, stem: str | Path) -> list[Path]:
    return style.save(ablations_figure(table, metric), stem)


def curves_figure(curve_data: dict[str, dict[str, list]]):
    """One panel per training curve (``CURVES``: 6); per ablation the mean over seeds (bold) and each seed
    (faint); a curve no point logged says so in its panel."""
    fig, axes = style.figure(2, 3, height=2.4)
    for ax, name in zip(axes.ravel(), CURVES):
        by_ablation: dict[str, list] = defaultdict(list)
        for label, pts in curve_data.get(name, {}).items():
            by_ablation[label.rsplit(" seed ", 1)[0]].append(dict(pts))
        for k, (ablation, runs) in enumerate(sorted(by_ablation.items())):
            color = style.PALETTE[k % len(style.PALETTE)]
            for run in runs:
                ax.plot(
                    list(run),
                    list(run.values()),
                    color=color,
                    alpha=0.25,
                    lw=0.8,
                    marker=style.marker(len(run)),
                )
            steps = sorted(set.intersection(*(set(r) for r in runs)))
            ys = [sum(r[s] for r in runs) / len(runs) for s in steps]
            ax.plot(steps, ys, color=color, label=ablation, marker=style.marker(len(steps)))
        ax.set_title(name.replace("_", " "))
        if by_ablation:
            ax.set_xlabel("step")
            style.integer_ticks(ax, "x")
        else:
            style.note(ax, "not logged by any point")
    handles, labels = next(
        (a.get_legend_handles_labels() for a in axes.ravel() if a.get_legend_handles_labels()[0]), ([], [])
    )
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4))
    fig.tight_layout(rect=(0, 0.07 if handles else 0, 1, 1))
    return fig


def plot_curves(curve_data: dict[str, dict[str, list]], stem: str | Path) -> list[Path]:
    return style.save(curves_figure(curve_data), stem)


def protocols_figure(table: dict[str, Any]):
    """An evaluation sweep (``sweeps.protocol_table``): per metric a panel, protocols on the x axis, a bar
    per policy; a metric no point measured (CPU mode: no timings) says so in its panel."""
    metrics = table["metrics"][: style.MAX_PANELS]
    fig, axes = style.figure(1, len(metrics), height=2.8)
    ok = [r for r in table["rows"] if r["status"] == "ok"]
    protocols, policies = table["protocols"], table["policies"]
    width = 0.8 / max(len(policies), 1)
    for ax, metric in zip(axes[0], metrics):
        ax.set_title(metric.replace("_", " "))
        if not any(r.get(metric) is not None for r in ok):
            style.note(ax, "not measured\n(CPU mode: correctness only)" if ok else "no point finished")
            continue
        for k, pol in enumerate(policies):
            vals = [
                next((r.get(metric) for r in ok if r["protocol"] == pro and r["policy"] == pol), None)
                for pro in protocols
            ]
            xs = [i + (k - (len(policies) - 1) / 2) * width for i in range(len(protocols))]
            ax.bar(
                xs, [v or 0.0 for v in vals], width, label=pol, color=style.PALETTE[k % len(style.PALETTE)]
            )
            for x, v in zip(xs, vals):
                if v is None:
                    ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
        ax.set_xticks(range(len(protocols)), protocols)
        ax.set_ylim(0, 1)
        ax.set_xlabel("judge protocol")
    axes[0][0].set_ylabel("share of all tasks")
    handles, labels = next(
        (a.get_legend_handles_labels() for a in axes[0] if a.get_legend_handles_labels()[0]), ([], [])
    )
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), title="judge policy")
    failed = len(table["failed"])
    fig.suptitle(f"{len(ok)} sweep points" + (f", {failed} failed" if failed else ""), fontsize=9)
    fig.tight_layout(rect=(0, 0.16 if handles else 0, 1, 1))
    return fig


def plot_protocols(table: dict[str, Any], stem: str | Path) -> list[Path]:
    return style.save(protocols_figure(table), stem)


def make_figures(
    run_dir: str | Path, out_dir: str | Path | None = None, audit: str | None = None
) -> list[Path]:
    """Every figure ``run_dir`` has the files for: a results.jsonl (Table 1; claims when the results carry
    claims), an audit report (``audit.json``/``audit.jsonl`` or ``audit``), a multirun directory
    (ablation bars and training curves; an evaluation sweep: the protocol x policy table and figure)."""
    run = Path(run_dir)
    out = Path(out_dir) if out_dir else run / "figures"
    made: list[Path] = []
    audit_path = (
        Path(audit)
        if audit
        else next((run / n for n in ("audit.json", "audit.jsonl") if (run / n).is_file()), None)
    )
    audit_obj = read_audit(audit_path) if audit_path else None
    if (run / "results.jsonl").is_file():
        results = load_results(run)
        # the run's whole problem set (a task without a result counts as failed), as the run's own summary
        report = table1_report(results, audit_obj, tasks=run_tasks(run, results))
        print(format_table1_report(report))
        made += plot_table1(report, out / "table1")
        if any(r.get("claimed") for r in results):
            made += plot_claims(claims_table(results), out / "claims")
    if audit_path:
        made += plot_audit(list(audit_obj.reports.values()), out / "audit")
    if any((d / ".hydra" / "overrides.yaml").is_file() for d in run.iterdir() if d.is_dir()):
        if is_evaluation_sweep(run):  # experiments.evaluate -m (e.g. +sweep=protocols): one table, one figure
            table = protocol_table(run)
            made += plot_protocols(table, out / "protocols")
            (out / "protocols.json").write_text(json.dumps(table, indent=2, default=str))
            return made
        points = collect(run)
        table = ablation_table(points)
        metric = next((m for m in ("faster_compile", "reward_mean") if m in table["metrics"]), None)
        if metric:
            made += plot_ablations(table, metric, out / f"ablations_{metric}")
        made += plot_curves(curves(points), out / "curves")
        (out / "ablations.json").write_text(json.dumps(table, indent=2, default=str))
    if not made:
        raise FileNotFoundError(f"{run}: nothing to draw (no results.jsonl, audit report or multirun points)")
    return made


@dataclass
class FiguresConfig:
    run_dir: str = ""  # an evaluation / agent / solutions run directory, or a multirun directory (required)
    out_dir: str | None = None  # None: <run_dir>/figures
    audit: str | None = None  # an audit report; None: <run_dir>/audit.json(l) when there is one


def run_figures(cfg: FiguresConfig) -> list[Path]:
    if not cfg.run_dir or not Path(cfg.run_dir).is_dir():
        raise FileNotFoundError(f"run_dir={cfg.run_dir!r} is not a directory")
    made = make_figures(cfg.run_dir, cfg.out_dir, cfg.audit)
    for path in made:
        print(path)
    return made
