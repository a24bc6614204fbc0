"""The staged pipeline: pretraining (unless ``init`` names a manifest to start from), then the configured
stages in order, each handing its manifest to the next; ``<out_dir>/pipeline.json`` lists them. With several
JAX processes every process runs it (rollouts split across them, see ``shares.py``)."""

from __future__ import annotations

import json
import time

from .._distributed import is_primary, sync
from .config import CRITIC_FREE, PipelineConfig
from .export import export_policy
from .manifest import Manifest
from .runtime import DeadlineReached, Runtime
from .stages import STAGE_FNS, run_init, run_pretrain


def _skipped(cfg: PipelineConfig, name: str) -> str | None:
    if name == "sft" and not cfg.sft.demos:
        return "no demonstrations (sft.demos)"
    if name == "value" and not cfg.value.enabled:
        return "value.enabled=false"
    if name == "value" and cfg.ppo.learner.advantage.estimator in CRITIC_FREE:
        return f"critic-free estimator {cfg.ppo.learner.advantage.estimator}"
    if name == "rft" and not cfg.rft.enabled and ("value" not in cfg.stages or _skipped(cfg, "value")):
        return "rft.enabled=false and no value pretraining needs its trajectories"
    return None


def run_pipeline(cfg: PipelineConfig, *, judge=None, eval_judge=None, client=None) -> dict[str, Manifest]:
    """Run (or resume) the pipeline; returns the manifests by stage (stage 0 included: ``pretrain`` for the
    toy environment, ``init`` for the agent). ``judge``/``eval_judge``: the toy environment's judges;
    ``client``: the agent environment's sandbox client (default: one made from ``cfg.sandbox``)."""
    cfg = cfg.seeded()
    rt = Runtime(cfg, judge=judge, eval_judge=eval_judge, client=client)
    out: dict[str, Manifest] = {}
    paths: dict[str, str] = {}
    summary: dict = {"stages": {}, "skipped": {}, "truncated": False, "time_s": {}}
    try:
        t0 = time.perf_counter()
        first = run_init if cfg.env == "agent" else run_pretrain
        prev = Manifest.load(cfg.init) if cfg.init else first(rt)
        out[prev.stage] = prev
        paths[prev.stage] = cfg.init or str(rt.out / prev.stage / "manifest.json")
        summary["time_s"][prev.stage] = time.perf_counter() - t0
        for name in cfg.stages:
            why = _skipped(cfg, name)
            if why:
                summary["skipped"][name] = why
                continue
            if rt.seconds_left() is not None and rt.seconds_left() <= 0:
                summary["skipped"][name] = "time budget spent"
                summary["truncated"] = True
                continue
            t0 = time.perf_counter()
            prev = STAGE_FNS[name](rt, prev)
            out[name] = prev
            paths[name] = str(rt.out / name / "manifest.json")
            summary["time_s"][name] = time.perf_counter() - t0
            summary["truncated"] |= bool(prev.extra.get("truncated"))
        if cfg.export and not summary["truncated"]:
            summary["final_policy"] = str(export_policy(rt, prev))
    except DeadlineReached:
        summary["truncated"] = True
    finally:
        summary["stages"] = paths
        if is_primary():
            (rt.out / "pipeline.json").write_text(json.dumps(summary, indent=2))
        rt.close()
    sync(f"pipeline:{rt.out}")
    return out
