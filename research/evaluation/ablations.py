"""Collect a Hydra multirun directory of ``experiments.train`` points into one table (rows: ablation x seed),
with the points that failed reported, never dropped.

A point is a job directory (``<sweep dir>/<num>_<overrides>/`` with ``.hydra/overrides.yaml``). Its final
metrics are the summary in the manifest of the last stage that ``pipeline.json`` lists (``research.rl``
pipeline layout: ``<out_dir>/<stage>/manifest.json`` and ``<out_dir>/<stage>/metrics.jsonl``). A point is
``failed`` when it has no final metrics (no ``pipeline.json``), when a configured stage is neither done nor
skipped (``run_pipeline`` writes ``pipeline.json`` even when a stage crashes), or when the sweep expected it
and no job directory exists (``never ran``); the last error line of its Hydra or submitit logs is added to the
reason when there is one. ``truncated``: its pipeline stopped at the time budget.
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
POINT_KEYS = ("ablation", "seed")
STAGES = ("warmup", "rft", "value", "ppo")  # research.rl pipeline order (PipelineConfig.stages)


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


def _job_config(job: Path) -> dict[str, Any]:
    path = job / ".hydra" / "config.yaml"
    cfg = yaml.safe_load(path.read_text()) if path.is_file() else None
    return cfg if isinstance(cfg, dict) else {}


def _out_dir(job: Path, cfg: dict[str, Any]) -> Path:
    """The job directory, unless the point's config sent its pipeline output elsewhere."""
    out = cfg.get("out_dir")
    if (job / "pipeline.json").is_file() or not out or "${" in str(out):
        return job
    return Path(out) if (Path(out) / "pipeline.json").is_file() else job


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _error_logs(job: Path) -> list[Path]:
    """The job's own logs (Hydra's ``<job>.log``, ``*.err``) and, for submitit, the logs of array task
    ``<job num>`` under ``<sweep dir>/.submitit/``."""
    logs = sorted(job.glob("*.log")) + sorted(job.glob("*.err"))
    num = job.name.split("_", 1)[0]
    if num.isdigit():
        for d in sorted((job.parent / ".submitit").glob(f"*_{num}")):
            logs += sorted(d.glob("*.err")) + sorted(d.glob("*.out"))
    return logs


def _last_error(job: Path) -> str:
    for log in _error_logs(job):
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        if any("Traceback" in ln or "Error executing job" in ln for ln in lines):
            errs = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", ln)]
            return f"{log.name}: {errs[-1] if errs else lines[-1]}"[:300]
    return ""


def _fail(p: Point, job: Path, why: str) -> Point:
    p.status = "failed"
    err = _last_error(job)
    p.reason = f"{why}; {err}" if err else why
    return p


def read_point(job: Path) -> Point:
    p = Point(job, _overrides(job))
    cfg = _job_config(job)
    out = _out_dir(job, cfg)
    pipe = out / "pipeline.json"
    if not pipe.is_file():
        return _fail(p, job, "no final metrics (no pipeline.json)")
    summary = json.loads(pipe.read_text())
    for stage, manifest in (summary.get("stages") or {}).items():
        path = Path(manifest)
        path = path if path.is_absolute() and path.exists() else out / stage / "manifest.json"
        p.stages[stage] = path.parent
        p.final_stage = stage
    # pipeline.json is written even when a stage crashes: every configured stage must be done or skipped
    expected = cfg.get("stages") or list(STAGES)
    unfinished = [s for s in expected if s not in p.stages and s not in (summary.get("skipped") or {})]
    if unfinished and not summary.get("truncated"):
        return _fail(p, job, f"stage {unfinished[0]} did not finish")
    final = p.stages.get(p.final_stage) if p.final_stage else None
    mpath = final / "manifest.json" if final else None
    metrics = (json.loads(mpath.read_text()).get("metrics") or {}) if mpath and mpath.is_file() else {}
    if not metrics:
        return _fail(p, job, f"no final metrics (stage {p.final_stage or 'none'} has none)")
    p.metrics = _flatten(metrics)
    if summary.get("truncated"):
        p.status, p.reason = (
            "truncated",
            "stopped at the time budget" + (f" before {', '.join(unfinished)}" if unfinished else ""),
        )
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
    """{"metrics", "rows": one per ablation x seed (status, reason, metrics), "ablations": mean/std over the
    points that finished, with counts of failed ones, "failed": the failed points}."""
    if metrics is None:
        seen = {k for p in points for k, v in p.metrics.items() if isinstance(v, int | float)}
        metrics = tuple(sorted(seen))
    rows = []
    for p in sorted(points, key=lambda p: (p.label("ablation"), p.label("seed"))):
        rows.append(
            {
                "ablation": p.label("ablation"),
                "seed": p.label("seed"),
                "status": p.status,
                "reason": p.reason,
                "dir": str(p.dir) if p.dir else None,
                **{m: p.metrics.get(m) for m in metrics},
            }
        )
    ablations: dict[str, Any] = {}
    for name in sorted({r["ablation"] for r in rows}):
        mine = [r for r in rows if r["ablation"] == name]
        done = [r for r in mine if r["status"] != "failed"]
        ablations[name] = {
            "points": len(mine),
            "failed": len(mine) - len(done),
            **{m: dict(zip(("mean", "std"), _stats([r[m] for r in done]))) for m in metrics},
        }
    failed = [r for r in rows if r["status"] == "failed"]
    return {"metrics": list(metrics), "rows": rows, "ablations": ablations, "failed": failed}


def format_ablations(table: dict[str, Any], metrics: tuple[str, ...] | None = None) -> str:
    metrics = tuple(metrics or table["metrics"][:6])
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    lines = [f"{'ablation':<20}{'seed':>5}{'status':>10}" + "".join(f"{m[:14]:>16}" for m in metrics)]
    for r in table["rows"]:
        lines.append(
            f"{r['ablation'][:19]:<20}{r['seed']:>5}{r['status']:>10}"
            + "".join(f"{fmt(r.get(m)):>16}" for m in metrics)
        )
    for r in table["failed"]:
        lines.append(f"FAILED {r['ablation']} seed {r['seed']}: {r['reason']}")
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
    """{curve name: {"ablation seed": [(step, value), ...]}} from each point's ``<stage>/metrics.jsonl``."""
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
                out[name][f"{p.label('ablation')} seed {p.label('seed')}"] = pts
    return out
