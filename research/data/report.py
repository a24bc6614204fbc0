"""The dataset manifest (counts per category, level, op count, split, dtype; drop reasons; decontamination)
and its summary plot."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter
from pathlib import Path

from .ops import CATEGORIES, LIBRARY


def _counts(values) -> dict:
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], str(kv[0]))))


def write_manifest(cfg, out: Path, kept, state, evals, stats, seconds: float) -> dict:
    est = [r.est_ms for r in kept if r.est_ms is not None]
    contaminated = [d for d in state.dropped if d.get("reason") == "contaminated"]
    gpus = sorted({g for r in kept for g in r.baselines})
    manifest = {
        "num_tasks": len(kept),
        "requested": cfg.num_tasks,
        "out_dir": str(out),
        "seed": cfg.seed,
        "library": {"num_ops": len(LIBRARY), "per_category": _counts(op.category for op in LIBRARY.values())},
        "counts": {
            "category": _counts(r.category for r in kept),
            "uses_category": {c: sum(c in r.categories for r in kept) for c in CATEGORIES},
            "level": _counts(r.level for r in kept),
            "num_ops": _counts("modules" if r.meta.get("bucket") == "m" else len(r.ops) for r in kept),
            "split": _counts(r.split for r in kept),
            "dtype": _counts(r.meta.get("dtype", "?") for r in kept),
            "family": _counts(r.meta.get("family", "?") for r in kept),
            "check_mode": _counts(r.meta.get("check_mode", "?") for r in kept),
            "ops": _counts(op for r in kept for op in r.ops),
        },
        "candidates": len(kept) + sum(state.drops.values()),
        "drop_reasons": _counts(d["reason"] for d in state.dropped),
        "decontamination": {
            "eval_dir": cfg.filters.decontam_dir,
            "eval_problems": len(evals) if evals is not None else 0,
            "threshold": cfg.filters.decontam_threshold,
            "ran": evals is not None,
            "dropped": contaminated,
        },
        "compile_check": {
            "backend_all_tasks": cfg.filters.compile_backend,
            "inductor_fraction": cfg.filters.inductor_fraction,
            "inductor_checked_this_run": stats.get("inductor_checked", 0),
            "inductor_failed_this_run": stats.get("inductor_failed", 0),
        },
        "runtime": {
            "window_ms": [cfg.filters.runtime_min_ms, cfg.filters.runtime_max_ms],
            "gpu_stage": bool(gpus),
            "gpus": gpus,
            "profile": dataclasses.asdict(cfg.profile),
            "est_ms_median": statistics.median(est) if est else None,
            "est_ms_min": min(est) if est else None,
            "est_ms_max": max(est) if est else None,
        },
        "seconds_this_run": round(seconds, 1),
        "check_seconds_this_run": {k[8:]: round(v, 1) for k, v in stats.items() if k.startswith("seconds_")},
        "split_config": dataclasses.asdict(cfg.split),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=False, default=str))
    try:
        plot_summary(manifest, kept, out / "summary.png")
        manifest["plot"] = "summary.png"
    except Exception as exc:  # a plot must never lose a dataset
        manifest["plot_error"] = repr(exc)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=False, default=str))
    return manifest


def plot_summary(manifest: dict, kept, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    c = manifest["counts"]

    def bars(ax, data: dict, title: str, horizontal: bool = False):
        keys = [str(k) for k in data]
        vals = list(data.values())
        (ax.barh if horizontal else ax.bar)(keys, vals, color="#4477aa")
        ax.set_title(title)
        if horizontal:
            ax.invert_yaxis()
        else:
            ax.tick_params(axis="x", rotation=45)

    bars(axes[0, 0], c["category"], f"main-op category ({manifest['num_tasks']} tasks)")
    order = sorted(c["num_ops"], key=lambda k: (k == "modules", str(k)))
    bars(axes[0, 1], {k: c["num_ops"][k] for k in order}, "ops per task")
    bars(axes[0, 2], {f"L{k}": v for k, v in sorted(c["level"].items())} | c["split"], "level / split")
    bars(
        axes[1, 0],
        manifest["drop_reasons"] or {"none": 0},
        f"drops ({manifest['candidates']} candidates)",
        horizontal=True,
    )
    est = [r.est_ms for r in kept if r.est_ms]
    ax = axes[1, 1]
    if est:
        import numpy as np

        ax.hist(est, bins=np.logspace(np.log10(min(est)), np.log10(max(est)) + 1e-9, 30), color="#228833")
        ax.set_xscale("log")
    ax.set_title(f"estimated eager ms on {manifest['runtime']['profile']['name']}")
    top = dict(list(c["ops"].items())[:20])
    bars(axes[1, 2], top, "20 most used ops", horizontal=True)
    fig.suptitle(f"synthesized dataset: {manifest['out_dir']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
