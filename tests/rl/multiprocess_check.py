"""Run by test_distributed.py in fresh interpreters (XLA_FLAGS and jax.distributed must precede any JAX
computation). The update is sharded_check.py's: one PPO step (prepare + one actor/critic update with 2
micro-batches) on a (data, fsdp, tensor) = (2, 2, 2) mesh over ``jax.devices()``.

    multiprocess_check.py worker I PORT OUT  # process I of 2 (4 CPU devices each): jax.distributed by
        research.rl.initialize_distributed; process 0 writes OUT/mp.npz, both the checkpoint OUT/ck
    multiprocess_check.py single OUT  # one process, 8 CPU devices: OUT/single.npz, then restores OUT/ck
Workers also gather a list of objects from both processes (research.rl.allgather_objects). Prints one JSON
line of measurements."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

role = sys.argv[1]
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={4 if role == 'worker' else 8}"
    + " --xla_backend_optimization_level=0"
)
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from rl_fixtures import tiny_models, tiny_source  # noqa: E402

import models  # noqa: E402
from research import rl  # noqa: E402
from research.rl._distributed import agree  # noqa: E402


def flat(tree) -> dict[str, np.ndarray]:
    """Every leaf as a host array of its global value (gathered from all processes)."""
    leaves = jax.tree.leaves(tree)
    if jax.process_count() > 1:
        leaves = jax.tree.leaves(multihost_utils.process_allgather(leaves, tiled=True))
    return {str(i): np.asarray(x, np.float64) for i, x in enumerate(leaves)}


def learner():
    actor, critic = tiny_models(seed=0, num_heads=4, num_kv_heads=2)
    opt = rl.OptimConfig(lr=1e-3, eps=1e-3)  # as sharded_check.py: see there why eps = 1e-3
    cfg = rl.LearnerConfig(micro_batches=2, actor=opt, critic=opt)
    return rl.Learner(cfg, actor, critic, mesh=models.make_mesh(data=2, fsdp=2, tensor=2))


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
    out = {"process": jax.process_index(), "processes": jax.process_count(), "devices": jax.device_count()}
    out["local_devices"] = jax.local_device_count()
    me = jax.process_index()
    # lists of different lengths and sizes (the buffers are padded to the longest): process order kept
    objs = [{"process": me, "text": "é" * (3 + 50 * me)}] * (me + 1) + [[0.1, None, True]] * me
    out["gathered"] = rl.allgather_objects(objs)
    out["agreed"] = [agree(me + 0.5), agree(me == 1)]  # process 0's, in each
    sh = learner()
    batch, _, _ = tiny_source()(0)
    prepared, _ = sh.prepare(batch)
    out["tokens_sharding"] = str(prepared.tokens.sharding.spec)
    metrics = sh.update(prepared)
    state = flat((sh.state.actor, sh.state.critic, sh.state.actor_opt, sh.state.critic_opt))
    arrays = {f"state/{k}": v for k, v in state.items()}
    arrays.update({f"metric/{k}": np.float64(v) for k, v in metrics.items()})
    if role == "worker":
        sh.save(out_dir / "ck", cursor={"batch": 7})
        again = learner()  # a fresh learner of both processes restores what they wrote together
        meta = again.restore(out_dir / "ck")
        restored = flat(
            (again.state.actor, again.state.critic, again.state.actor_opt, again.state.critic_opt)
        )
        out["restore_diff"] = max(float(np.max(np.abs(restored[k] - state[k]))) for k in state)
        out["cursor"] = meta["cursor"]
        if rl.is_primary():
            np.savez(out_dir / "mp.npz", **arrays)
        rl.sync("multiprocess_check:done")
    else:
        np.savez(out_dir / "single.npz", **arrays)
        one = rl.Learner(sh.config, *tiny_models(seed=43, num_heads=4, num_kv_heads=2))  # one device
        meta = one.restore(out_dir / "ck")
        restored = flat((one.state.actor, one.state.critic, one.state.actor_opt, one.state.critic_opt))
        out["single_restore_diff"] = max(float(np.max(np.abs(restored[k] - state[k]))) for k in state)
        out["restored_step"] = int(one.state.step)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
