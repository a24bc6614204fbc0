"""Run by test_distributed.py in fresh interpreters: the toy pipeline (pipeline_fixtures.tiny_pipeline,
RuleJudge: no sandbox) through pretraining, RFT (2 rollout batches), value pretraining, a 2-step PPO stage,
greedy evaluations and the export, its learners on mesh fsdp=2 and its rollouts split in two shares
(research.rl.pipeline.shares).

    pipeline_mp_check.py worker I PORT OUT  # JAX process I of 2, one CPU device each (the mesh spans both)
    pipeline_mp_check.py single OUT         # one process of 2 CPU devices playing both shares in turn
Both write under OUT/<role>; each process writes its measurements to OUT/<role><process index>.json."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
from pathlib import Path

role = sys.argv[1]
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={1 if role == 'worker' else 2}"
    + " --xla_backend_optimization_level=0"
)
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from pipeline_fixtures import RuleJudge, tiny_pipeline  # noqa: E402

from research import rl  # noqa: E402
from research.rl.pipeline import RFTFilterConfig, run_pipeline, runtime, shares, stages  # noqa: E402
from research.rl.pipeline.config import EvalConfig  # noqa: E402

ROLLOUTS: list[dict] = []  # per split rollout: the episodes this process played, and of how many
BATCHES: list[dict] = []  # per packed batch: hashes of all its arrays and of its tokens alone

_rollout = shares.SharedEnv.rollout


def recording_rollout(self, sampler, cfg, cursor, tasks=None, groups=None):
    out = _rollout(self, sampler, cfg, cursor, tasks, groups)
    mine = sorted(i for s in self.mine for i in self.played[s])
    ROLLOUTS.append({"cursor": cursor, "n": len(out), "mine": mine, "groups": [r.group for r in out]})
    return out


_pack = stages._pack


def recording_pack(*a, **kw):
    batch, drops, info = _pack(*a, **kw)
    if batch is not None:
        leaves = [np.asarray(x) for x in jax.tree.leaves(batch)]
        BATCHES.append(
            {
                "all": hashlib.sha256(b"".join(x.tobytes() for x in leaves)).hexdigest(),
                "tokens": hashlib.sha256(np.asarray(batch.tokens).tobytes()).hexdigest(),
            }
        )
    return batch, drops, info


def config(out: Path):
    cfg = tiny_pipeline(
        out,
        stages=["rft", "value", "ppo"],
        mesh=rl.MeshConfig(fsdp=-1),
        eval=EvalConfig(enabled=True, max_tasks=3, turns=2),  # 3 tasks: shares of 2 and 1
    )
    # Short and steep: most plans of the PPO stage parse, so the judge's verdicts shape the second turn.
    cfg.pretrain = dataclasses.replace(cfg.pretrain, steps=40, log_every=10, lr=5e-2)
    # RFT keeps every sampled trajectory (the tiny policy's rewards are -1), so its learner runs
    cfg.rft.filters = RFTFilterConfig(
        min_reward=-2.0, drop_invalid=False, drop_hallucinated=False, drop_redundant=False
    )
    return cfg


def main() -> None:
    out_dir = Path(sys.argv[-1])
    if role == "worker":
        dist = rl.DistributedConfig(
            mode="manual",
            coordinator_address=f"127.0.0.1:{sys.argv[3]}",
            num_processes=2,
            process_id=int(sys.argv[2]),
        )
        assert rl.initialize_distributed(dist)
    else:  # one process plays both shares, gathered through JSON as two processes' would be
        runtime.split_env = functools.partial(shares.split_env, count=2, mine=[0, 1], gather=shares.json_copy)
    shares.SharedEnv.rollout = recording_rollout
    stages._pack = recording_pack
    run = out_dir / role
    manifests = run_pipeline(config(run), judge=RuleJudge())
    report = {
        "process": jax.process_index(),
        "processes": jax.process_count(),
        "devices": jax.device_count(),
        "rollouts": ROLLOUTS,
        "batches": BATCHES,
        "ppo": rl.read_metrics(run / "ppo"),
        "rft": rl.read_metrics(run / "rft"),
        "value": rl.read_metrics(run / "value"),
        "value_ev": {k: v for k, v in manifests["value"].metrics.items() if "explained" in k},
        "eval": manifests["ppo"].metrics.get("eval"),
        "pretrain_eval": manifests["pretrain"].metrics.get("eval"),
        "files": sorted(
            str(p.relative_to(run))
            for p in run.rglob("*")
            if p.is_file() and not {"checkpoints", "params", "actor"} & set(p.relative_to(run).parts)
        ),
    }
    (out_dir / f"{role}{jax.process_index()}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
