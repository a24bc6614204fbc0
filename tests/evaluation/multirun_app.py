"""A stand-in for ``experiments.train`` in the multirun tests: a real Hydra app (real job directories,
``.hydra/``, ``multirun.yaml``) that writes the staged pipeline's files (``<stage>/metrics.jsonl`` in the
research.rl MetricsWriter format, ``<stage>/manifest.json``, ``pipeline.json``) with synthetic numbers, and
crashes in the ppo stage for ``ablation=no_rft seed=1`` after pipeline.json is written, as run_pipeline does.

    python tests/evaluation/multirun_app.py -m ablation=full,no_rft seed=0,1 hydra.sweep.dir=DIR
"""

from __future__ import annotations

import json
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig

STAGES = ["warmup", "rft", "value", "ppo"]


def register() -> None:
    """The app's configs, stored only when it runs: tests import KEYS/value from this module, and a stored
    ``ablation`` group would shadow the real conf/ablation in every later composition of that process."""
    cs = ConfigStore.instance()
    cs.store(
        name="app",
        node={
            "defaults": [{"ablation": "full"}, "_self_"],
            "seed": 0,
            "stages": STAGES,
            "out_dir": "${hydra:runtime.output_dir}",
            "steps": 4,
            # named as conf/*.yaml name job directories: <num>_<overrides>
            "hydra": {"sweep": {"subdir": "${hydra.job.num}_${hydra.job.override_dirname}"}},
        },
    )
    cs.store(group="ablation", name="full", node={"name": "full", "gain": 1.0})
    cs.store(group="ablation", name="no_rft", node={"name": "no_rft", "gain": 0.5})


def value(gain: float, seed: int, step: int, k: int) -> float:
    """The synthetic metric k at a step (the tests recompute it)."""
    return gain * (step + 1) / 10 + seed / 100 + k / 1000


KEYS = ["reward_mean", "faster_compile", "entropy", "explained_variance", "clip_frac", "response_tokens_mean"]


@hydra.main(config_path=None, config_name="app", version_base="1.3")
def main(cfg) -> None:
    out = Path(HydraConfig.get().runtime.output_dir)
    done = {}
    for stage in cfg.stages:
        d = out / stage
        d.mkdir(parents=True, exist_ok=True)
        if stage == "ppo" and cfg.ablation.name == "no_rft" and cfg.seed == 1:
            (out / "pipeline.json").write_text(
                json.dumps({"stages": done, "skipped": {}, "truncated": False})
            )
            raise RuntimeError("critic diverged")
        rows = [
            {"step": s, **{k: value(cfg.ablation.gain, cfg.seed, s, i) for i, k in enumerate(KEYS)}}
            for s in range(1, cfg.steps + 1)
        ]
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        manifest = {
            "stage": stage,
            "actor": None,
            "critic": None,
            "step": cfg.steps,
            "config_hash": "x",
            "metrics": {
                **{k: rows[-1][k] for k in KEYS},
                "steps_done": cfg.steps,
                "eval": {"test": {"pass_rate": cfg.ablation.gain}},
            },
        }
        (d / "manifest.json").write_text(json.dumps(manifest))
        done[stage] = str(d / "manifest.json")
    (out / "pipeline.json").write_text(json.dumps({"stages": done, "skipped": {}, "truncated": False}))


if __name__ == "__main__":
    register()
    main()
