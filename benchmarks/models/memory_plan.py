"""Print ``models.memory_plan``'s table for a training preset (the model, its PPO learner and rollout sizes):

    python -m benchmarks.models.memory_plan --preset qwen2_5_7b   # bytes per component, fits 130 GiB?
    python -m benchmarks.models.memory_plan --preset qwen2_5_3b --overlap --devices 2 ppo.rollout.episodes=64

The preset is composed exactly as ``python -m experiments.train preset=NAME`` composes it (extra arguments are
Hydra overrides), so the plan is of the settings a run would use. A wrong preset or override prints one line
and exits 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import models

DEVICE_GIB = 130.0  # of an H200's ~139 GiB usable: XLA workspace, fragmentation and the CUDA context


def plan_for(
    pipeline, *, devices: int | None = None, overlap: bool = False
) -> tuple[models.ModelConfig, models.MemoryPlan]:
    """(model config, memory plan) of a ``research.rl.pipeline.PipelineConfig`` on ``devices`` GPUs of the
    fsdp axis (None: the preset's ``mesh.fsdp`` when it names a size, else one GPU): its PPO stage (actor,
    and a critic with GAE: the largest learner) trained on rows of ``ppo.rollout.max_len`` tokens, and its
    rollouts' KV cache: one cache row per episode of the context budget rounded up to the agent sampler's
    64-token buckets plus the turn's new tokens (``models.Sampler``'s cache is contiguous: one page per
    row)."""
    if devices is None:
        devices = max(pipeline.mesh.fsdp, 1)  # -1 (every device) is known only on the machine: --devices
    spec = pipeline.model
    cfg = dataclasses.replace(spec.arch, **spec.runtime())
    ppo = pipeline.ppo
    row = -(-ppo.rollout.max_context // 64) * 64 + ppo.rollout.max_turn_tokens
    settings = models.MemorySettings(
        micro_batch_tokens=ppo.learner.micro_batch_tokens or ppo.rollout.episodes * ppo.rollout.max_len,
        seq_len=ppo.rollout.max_len,
        chunk_size=ppo.learner.chunk_size,
        critic=ppo.learner.advantage.estimator == "gae",  # the one estimator that trains a critic
        reference=ppo.learner.loss.kl_penalty != "none",
        kv_tokens=ppo.rollout.episodes * row,
        page_size=row,
        rollout_rows=ppo.rollout.episodes,
        prefill_tokens=row - ppo.rollout.max_turn_tokens,
        devices=devices,
        overlap=overlap,
    )
    return cfg, models.memory_plan(cfg, settings)


def compose_preset(preset: str, overrides=()):
    """The PipelineConfig of ``experiments.train preset=PRESET OVERRIDES`` (no run directory is made)."""
    from hydra import compose, initialize_config_dir

    from experiments import train
    from experiments._hydra import CONF

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=train.CONFIG_NAME, overrides=[f"preset={preset}", *overrides])
    return train.to_config(cfg)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True, help="a conf/preset/ name, e.g. qwen2_5_1_5b")
    parser.add_argument(
        "--devices", type=int, default=None, help="fsdp devices (default: the preset's mesh.fsdp, else 1)"
    )
    parser.add_argument("--overlap", action="store_true", help="rollouts while learning (overlap.enabled)")
    parser.add_argument("--device-gib", type=float, default=DEVICE_GIB)
    parser.add_argument(
        "overrides", nargs="*", help="Hydra overrides, e.g. ppo.learner.micro_batch_tokens=8192"
    )
    args = parser.parse_args(argv)
    try:
        pipeline = compose_preset(args.preset, args.overrides)
        cfg, plan = plan_for(pipeline, devices=args.devices, overlap=args.overlap)
    except Exception as exc:  # Hydra's missing-option errors, ConfigError, ValueError: one line, exit 2
        print(f"memory_plan: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    s = plan.settings
    print(
        f"{args.preset}: {plan.params_count / 1e9:.3f}B parameters "
        f"(critic {plan.critic_params_count / 1e9:.3f}B), param {cfg.param_dtype}, "
        f"compute {cfg.compute_dtype}, "
        f"remat {cfg.remat}, attention {cfg.attention_impl}\n"
        f"micro_batch_tokens {s.micro_batch_tokens}, seq_len {s.seq_len}, KV tokens {s.kv_tokens} over "
        f"{s.rollout_rows} rows, devices {s.devices}, overlap {s.overlap}"
    )
    print(plan.table())
    ok = plan.fits(args.device_gib * 1024**3)
    print(f"fits {args.device_gib:g} GiB: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
