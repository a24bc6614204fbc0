"""Collect a Hydra multirun directory of ``experiments.train`` points into one table (rows: preset x seed),
with the points that failed reported, never dropped.

A point is a job directory (``<sweep dir>/<num>_<overrides>/`` with ``.hydra/overrides.yaml``). Its final
metrics are the summary in the manifest of the last stage that ``pipeline.json`` lists (``research.rl``
pipeline layout: ``<out_dir>/<stage>/manifest.json`` and ``<out_dir>/<stage>/metrics.jsonl``). A point is
``failed`` when it has no final metrics (it crashed: the reason is the last error line of its logs, Hydra's
or submitit's, when there is one) or when the sweep expected it and no job directory exists (``never ran``);
``truncated`` when its pipeline stopped at the time budget.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# Training-curve panels: our name -> the metric keys research.rl writes (first one present wins).
CURVES = {
    "reward": ("reward_mean",),
    "faster_than_compile": ("faster_compile",),
    "entropy": ("entropy",),
    "explained_variance": ("explained_variance",),
    "clip_fraction": ("clip_frac",),
    "response_length": ("response_tokens_mean", "response_length"),
}
POINT_KEYS = ("preset", "seed")


@dataclass
class Point:
    dir: Path | None
    overrides: dict[str, str]
    status: str = "ok"  # ok | failed | truncated
    reason: str = ""
    final_stage: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, Path] = field(default_factory=dict)  # stage -> its directory (metrics.jsonl)

    def label(self, key: str) -> str:
        return self.overrides.get(key, "default")


def _overrides(job: Path) -> dict[str, str]:
    raw = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()) or []
    out = {}
    for item in raw:
        k, _, v = str(item).partition("=")
        out[k.lstrip("+~")] = v
    return out


def _out_dir(job: Path) -> Path:
    """The job directory, unless the point's config sent its pipeline output elsewhere."""
    if (job / "pipeline.json").is_file():
        return job
    cfg_path = job / ".hydra" / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text()) if cfg_path.is_file() else None
    out = cfg.get("out_dir") if isinstance(cfg, dict) else None
    if out and "${" not in str(out) and (Path(out) / "pipeline.json").is_file():
        return Path(out)
    return job


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _last_error(job: Path) -> str:
    logs = sorted(job.glob("*.log")) + sorted(job.glob(".submitit/**/*.err")) + sorted(job.glob("*.err"))
    for log in logs:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        if any("Traceback" in ln or "Error executing job" in ln for ln in lines):
            errs = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", ln)]
            return f"{log.name}: {errs[-1] if errs else lines[-1]}"[:300]
    return ""


def read_point(job: Path) -> Point:
    p = Point(job, _overrides(job))
    out = _out_dir(job)
    pipe = out / "pipeline.json"
    if not pipe.is_file():
        p.status, p.reason = "failed", _last_error(job) or "no final metrics (no pipeline.json)"
        return p
    summary = json.loads(pipe.read_text())
    for stage, manifest in (summary.get("stages") or {}).items():
        path = Path(manifest)
        path = path if path.is_absolute() and path.exists() else out / stage / "manifest.json"
        p.stages[stage] = path.parent
        p.final_stage = stage
    final = p.stages.get(p.final_stage) if p.final_stage else None
    mpath = final / "manifest.json" if final else None
    metrics = (json.loads(mpath.read_text()).get("metrics") or {}) if mpath and mpath.is_file() else {}
    if not metrics:
        p.status = "failed"
        p.reason = _last_error(job) or f"no final metrics (stage {p.final_stage or 'none'} has none)"
        return p
    p.metrics = _flatten(metrics)
    if summary.get("truncated"):
        p.status, p.reason = "truncated", "stopped at the time budget"
    return p


def _expected(sweep_dir: Path) -> list[dict[str, str]]:
    """The points the sweep asked for (task overrides with commas x sweeper params), when multirun.yaml
    says; [] when it cannot be read."""
    path = sweep_dir / "multirun.yaml"
    if not path.is_file():
        return []
    try:
        h = (yaml.safe_load(path.read_text()) or {}).get("hydra", {})
        axes: dict[str, list[str]] = {}
        for k, v in ((h.get("sweeper") or {}).get("params") or {}).items():
            axes[str(k).lstrip("+~")] = [s.strip() for s in str(v).split(",")]
        for item in (h.get("overrides") or {}).get("task") or []:
            k, _, v = str(item).partition("=")
            if k.lstrip("+~") in axes or "," in v:
                axes[k.lstrip("+~")] = [s.strip() for s in v.split(",")]
    except (yaml.YAMLError, AttributeError, TypeError):
        return []
    keys = sorted(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def collect(sweep_dir: str | Path) -> list[Point]:
    """Every point of a multirun directory, failed and never-run ones included."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"no multirun directory at {sweep_dir}")
    jobs = sorted(
        (d for d in sweep_dir.iterdir() if (d / ".hydra" / "overrides.yaml").is_file()),
        key=lambda d: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", d.name)],
    )
    if not jobs:
        raise FileNotFoundError(f"{sweep_dir} holds no Hydra job directories (.hydra/overrides.yaml)")
    points = [read_point(j) for j in jobs]
    for want in _expected(sweep_dir):
        if not any(all(p.overrides.get(k) == v for k, v in want.items()) for p in points):
            points.append(Point(None, want, "failed", "never ran (no job directory)"))
    return points


def _stats(xs: list[float]) -> tuple[float | None, float | None]:
    xs = [x for x in xs if isinstance(x, int | float) and math.isfinite(x)]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def ablation_table(points: list[Point], metrics: tuple[str, ...] | None = None) -> dict[str, Any]:
    """{"metrics", "rows": one per preset x seed (status, reason, metrics), "presets": mean/std over the
    points that finished, with counts of failed ones, "failed": the failed points}."""
    if metrics is None:
        seen = {k for p in points for k, v in p.metrics.items() if isinstance(v, int | float)}
        metrics = tuple(sorted(seen))
    rows = []
    for p in sorted(points, key=lambda p: (p.label("preset"), p.label("seed"))):
        rows.append(
            {
                "preset": p.label("preset"),
                "seed": p.label("seed"),
                "status": p.status,
                "reason": p.reason,
                "dir": str(p.dir) if p.dir else None,
                **{m: p.metrics.get(m) for m in metrics},
            }
        )
    presets: dict[str, Any] = {}
    for name in sorted({r["preset"] for r in rows}):
        mine = [r for r in rows if r["preset"] == name]
        done = [r for r in mine if r["status"] != "failed"]
        presets[name] = {
            "points": len(mine),
            "failed": len(mine) - len(done),
            **{m: dict(zip(("mean", "std"), _stats([r[m] for r in done]))) for m in metrics},
        }
    failed = [r for r in rows if r["status"] == "failed"]
    return {"metrics": list(metrics), "rows": rows, "presets": presets, "failed": failed}


def format_ablations(table: dict[str, Any], metrics: tuple[str, ...] | None = None) -> str:
    metrics = tuple(metrics or table["metrics"][:6])
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    lines = [f"{'preset':<20}{'seed':>5}{'status':>10}" + "".join(f"{m[:14]:>16}" for m in metrics)]
    for r in table["rows"]:
        lines.append(
            f"{r['preset'][:19]:<20}{r['seed']:>5}{r['status']:>10}"
            + "".join(f"{fmt(r.get(m)):>16}" for m in metrics)
        )
    for r in table["failed"]:
        lines.append(f"FAILED {r['preset']} seed {r['seed']}: {r['reason']}")
    return "\n".join(lines)


def read_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a kill
                break
    return rows


def curves(points: list[Point], stage: str = "ppo") -> dict[str, dict[str, list[tuple[int, float]]]]:
    """{curve name: {"preset seed": [(step, value), ...]}} from each point's ``<stage>/metrics.jsonl``."""
    out: dict[str, dict[str, list]] = {name: {} for name in CURVES}
    for p in points:
        d = p.stages.get(stage) or ((p.dir / stage) if p.dir else None)
        rows = read_jsonl_rows(d / "metrics.jsonl") if d else []
        for name, keys in CURVES.items():
            key = next((k for k in keys if any(k in r for r in rows)), None)
            pts = [
                (int(r["step"]), float(r[key])) for r in rows if key and isinstance(r.get(key), int | float)
            ]
            if pts:
                out[name][f"{p.label('preset')} seed {p.label('seed')}"] = pts
    return out
