"""Run by test_sharded.py in a fresh interpreter with 8 fake CPU devices (XLA_FLAGS must precede jax).

One PPO step (prepare + one actor/critic update with 2 micro-batches) on a (2, 2, 2) mesh vs one device;
then a checkpoint written on the (2, 2, 2) mesh restored onto (1, 2, 4) and onto one device. Prints one
JSON line of measurements; the test asserts on them."""

from __future__ import annotations

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
from rl_fixtures import tiny_models, tiny_source

import models
from research import rl


def max_diff(a, b) -> float:
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b))
    return max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)))) for x, y in pairs)


def main() -> None:
    out: dict = {"devices": jax.device_count()}
    actor, critic = tiny_models(seed=0, num_heads=4, num_kv_heads=2)
    # Adam's first step is lr * g / (|g| + eps): with eps = 1e-8 it is sign(g), which turns fp32 rounding of
    # a near-zero gradient entry into a full lr step. eps = 1e-3 bounds that sensitivity by lr / eps = 1,
    # so parameters after the update are compared as tightly as the gradients.
    opt = rl.OptimConfig(lr=1e-3, eps=1e-3)
    cfg = rl.LearnerConfig(micro_batches=2, actor=opt, critic=opt)
    batch, _, _ = tiny_source()(0)
    one = rl.Learner(cfg, actor, critic)
    mesh = models.make_mesh(data=2, fsdp=2, tensor=2)
    sh = rl.Learner(cfg, actor, critic, mesh=mesh)
    out["q_spec"] = str(sh.state.actor["model"]["layers"]["q_proj"].get_value().sharding.spec)
    p1, m1 = one.prepare(batch)
    p8, m8 = sh.prepare(batch)
    out["tokens_sharding"] = str(p8.tokens.sharding.spec)
    out["prepare_diff"] = max_diff(
        (p1.old_logprobs, p1.values, p1.advantages, p1.returns),
        (p8.old_logprobs, p8.values, p8.advantages, p8.returns),
    )
    g1a, g1c, gm1 = one.gradients(p1)
    g8a, g8c, gm8 = sh.gradients(p8)
    out["grad_diff"] = max(max_diff(g1a, g8a), max_diff(g1c, g8c))
    out["grad_scale"] = max(float(np.max(np.abs(np.asarray(x)))) for x in jax.tree.leaves((g1a, g1c)))
    u1, u8 = one.update(p1), sh.update(p8)
    out["metric_diff"] = max(abs(u1[k] - u8[k]) for k in u1)
    out["param_diff"] = max_diff((one.state.actor, one.state.critic), (sh.state.actor, sh.state.critic))
    out["opt_diff"] = max_diff(
        (one.state.actor_opt, one.state.critic_opt), (sh.state.actor_opt, sh.state.critic_opt)
    )
    out["q_spec_after"] = str(sh.state.actor["model"]["layers"]["q_proj"].get_value().sharding.spec)

    with tempfile.TemporaryDirectory() as tmp:
        sh.save(Path(tmp) / "ck", cursor={"batch": 7})
        other = rl.Learner(
            cfg,
            *tiny_models(seed=42, num_heads=4, num_kv_heads=2),
            mesh=models.make_mesh(data=1, fsdp=2, tensor=4),
        )
        meta = other.restore(Path(tmp) / "ck")
        single = rl.Learner(cfg, *tiny_models(seed=43, num_heads=4, num_kv_heads=2))
        single.restore(Path(tmp) / "ck")
        out["cursor"] = meta["cursor"]
        out["restore_diff"] = max(
            max_diff(sh.state[:4], other.state[:4]), max_diff(sh.state[:4], single.state[:4])
        )
        out["restored_step"] = [int(other.state.step), int(single.state.step)]
        out["restored_spec"] = str(other.state.actor["model"]["layers"]["q_proj"].get_value().sharding.spec)
        nxt, _, _ = tiny_source()(1)
        a, b, c = sh.ppo_step(nxt), other.ppo_step(nxt), single.ppo_step(nxt)
        out["after_restore_metric_diff"] = max(max(abs(a[k] - b[k]), abs(a[k] - c[k])) for k in a)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
