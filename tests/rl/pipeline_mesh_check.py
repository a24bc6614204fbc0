"""Run by test_pipeline_mesh.py in a fresh interpreter with 8 fake CPU devices (XLA_FLAGS must precede jax).

The tiny pipeline (pipeline_fixtures.tiny_pipeline, RuleJudge) on mesh (data, fsdp) = (2, 4): every stage
end to end; then the warm-up alone on one device from the same pretrained policy, its metrics compared with
the sharded run's; the final actor restored onto one device and onto another mesh; the one-line errors of
bad mesh sizes. Prints one JSON line of measurements; the test asserts on them."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    " --xla_backend_optimization_level=0"
)
os.environ["JAX_PLATFORMS"] = "cpu"

import jax
import numpy as np
from flax import nnx
from pipeline_fixtures import RuleJudge, tiny_pipeline

import models
from research.rl import MeshConfig, read_metrics
from research.rl.pipeline import RFTFilterConfig, run_pipeline, stages

SEEN: list[dict] = []


def _sh(leaf) -> str:
    return str(getattr(leaf.sharding, "spec", "one device"))


def _q(tree):
    """The q_proj weight (a tensor the rules shard over fsdp) of an actor's or critic's state."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(tree))[0]:
        if "q_proj" in jax.tree_util.keystr(path):
            return leaf
    raise KeyError("no q_proj")


def _spec(tree) -> str:
    return _sh(_q(tree))


class RecordingLearner(stages.Learner):
    """The pipeline's Learner, noting each instance's mesh and parameter layout (proof the stages shard)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        params = self.state.actor if self.state.actor is not None else self.state.critic
        opt = self.state.actor_opt if self.state.actor is not None else self.state.critic_opt
        mu = [x for k, x in jax.tree_util.tree_flatten_with_path(opt)[0] if "mu" in jax.tree_util.keystr(k)]
        mu = [x for x in mu if np.ndim(x) == 4 and x.shape == _q(params).shape]  # Adam's mu of q_proj
        SEEN.append(
            {
                "mesh": None if self.mesh is None else dict(self.mesh.shape),
                "q_spec": _spec(params),
                "opt_q_spec": _sh(mu[0]) if mu else None,
            }
        )


_pretrain = stages.pretrain


def recording_pretrain(*a, **kw):
    model, last = _pretrain(*a, **kw)
    SEEN.append({"stage": "pretrain", "q_spec": _sh(model.model.layers.q_proj.get_value())})
    return model, last


def _cfg(out, **kw):
    cfg = tiny_pipeline(out, **kw)
    cfg.rft.batch_size = 8  # 4 rows do not split over data * fsdp = 8 row shards
    # Keep every sampled trajectory: the tiny policy's rewards are mostly -1, and an RFT stage that accepts
    # nothing trains nothing, so its learner would never run sharded.
    cfg.rft.filters = RFTFilterConfig(
        min_reward=-2.0, drop_invalid=False, drop_hallucinated=False, drop_redundant=False
    )
    return cfg


def _numbers(row: dict) -> dict:
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and not k.startswith("time/")}


def main() -> None:
    stages.Learner = RecordingLearner
    stages.pretrain = recording_pretrain
    out: dict = {"devices": jax.device_count()}
    mesh_cfg = MeshConfig(data=2, fsdp=4)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sharded = dataclasses.replace(_cfg(tmp / "mesh"), mesh=mesh_cfg)
        manifests = run_pipeline(sharded, judge=RuleJudge())
        out["stages"] = sorted(manifests)
        out["seen"] = list(SEEN)
        out["rft_steps"] = manifests["rft"].extra.get("rft_steps", 0)
        out["rft_reason"] = manifests["rft"].extra.get("reason")
        SEEN.clear()
        # The warm-up alone on one device from the sharded run's pretrained policy: same inputs, only the
        # layout differs.
        init = str(tmp / "mesh" / "pretrain" / "manifest.json")
        single = _cfg(tmp / "one", stage="warmup", init=init)
        run_pipeline(single, judge=RuleJudge())
        out["seen_single"] = list(SEEN)
        a, b = read_metrics(tmp / "mesh" / "warmup"), read_metrics(tmp / "one" / "warmup")
        out["warmup_steps"] = [len(a), len(b)]
        diffs = {}
        for ra, rb in zip(a, b):
            na, nb = _numbers(ra), _numbers(rb)
            assert na.keys() == nb.keys(), (sorted(na), sorted(nb))
            for k in na:
                diffs[f"{ra['step']}:{k}"] = abs(float(na[k]) - float(nb[k]))
        worst = sorted(diffs.items(), key=lambda kv: -kv[1])[:5]
        out["warmup_worst"] = worst
        out["warmup_metric_diff"] = {
            str(s): max(v for k, v in diffs.items() if k.startswith(f"{s}:")) for s in (1, 2)
        }
        out["warmup_metric_keys"] = len(_numbers(a[0]))
        out["warmup_grad_norm"] = float(a[0]["actor_grad_norm"])

        final = manifests["ppo"].actor
        on_one = models.restore_checkpoint(final)
        on_mesh = models.restore_checkpoint(final, mesh=models.make_mesh(data=2, fsdp=4, tensor=1))
        on_other = models.restore_checkpoint(final, mesh=models.make_mesh(data=1, fsdp=2, tensor=4))
        leaves = lambda m: jax.tree.leaves(nnx.to_pure_dict(nnx.state(m)))
        out["restore_diff"] = max(
            float(np.max(np.abs(np.asarray(x) - np.asarray(y)) + np.abs(np.asarray(x) - np.asarray(z))))
            for x, y, z in zip(leaves(on_one), leaves(on_mesh), leaves(on_other))
        )
        out["restored_one_devices"] = len(on_one.model.layers.q_proj.get_value().sharding.device_set)
        out["restored_mesh_spec"] = str(on_mesh.model.layers.q_proj.get_value().sharding.spec)

        errors = {}
        for name, make in {
            "product": lambda: run_pipeline(
                dataclasses.replace(_cfg(tmp / "bad1"), mesh=MeshConfig(data=2, fsdp=2)), judge=RuleJudge()
            ),
            "rows": lambda: dataclasses.replace(tiny_pipeline(tmp / "bad2"), mesh=mesh_cfg),
            "auto_rows": lambda: run_pipeline(
                dataclasses.replace(tiny_pipeline(tmp / "bad3"), mesh=MeshConfig(fsdp=-1)), judge=RuleJudge()
            ),
        }.items():
            try:
                make()
                errors[name] = None
            except ValueError as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"
        out["errors"] = errors
    print(json.dumps(out))


if __name__ == "__main__":
    main()
