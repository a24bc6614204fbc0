"""research.rl: the learner half of the staged RL pipeline (PPO / RFT / value pretraining) in JAX.

Algorithm math is pure jitted functions with registries by name (verl style); one jitted update trains the
actor (``models.CausalLM``) and the critic (``models.Critic``, separate parameters) with gradient
accumulation, Optax AdamW, fp32 master weights and bf16 compute, sharded over the (data, fsdp, tensor)
mesh of ``models``. See docs/rl.md.

    batch, drops, _ = rl.pack_trajectories(trajs, rl.RewardConfig())        # research.rollout.Trajectory
    learner = rl.Learner(rl.LearnerConfig(), actor, critic, mesh=mesh)
    metrics = learner.ppo_step(batch)                                        # prepare + update(s)
    rl.train(learner, source, rl.RunConfig(out_dir="runs/x", steps=100))    # resumable loop, JSONL + TB

May import: ``models``, ``research.rollout`` (the trajectories it learns from), ``research.toyenv`` (the
pipeline's environment), jax/flax/optax/orbax, numpy, tensorboardX, matplotlib, tqdm, and ``kernels_env``
only through ``kernels_env.client`` (the reward registry). Must never import: hydra, omegaconf,
``experiments``.
"""

from ._advantages import ADVANTAGES, compute_advantages, gae, grpo, masked_whiten, returns_to_go, rloo, trloo
from ._batch import PackConfig, RLBatch, SegmentLayout, pack_trajectories
from ._checkpoint import CheckpointDir, restore_learner, save_learner
from ._config import AdvantageConfig, LearnerConfig, LossConfig, OptimConfig
from ._devices import DevicesConfig, apply_devices
from ._distributed import DistributedConfig, allgather_objects, initialize_distributed, is_primary, sync
from ._learner import Learner, jitted_updates
from ._loop import RunConfig, train
from ._losses import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    KL_PENALTIES,
    POLICY_LOSSES,
    SEGMENT_AGGREGATIONS,
    aggregate,
    kl_k1,
    kl_k2,
    kl_k3,
    ppo_clip,
    value_loss,
)
from ._mesh import MeshConfig, MeshError, build_mesh
from ._metrics import MetricsWriter, plot_curves, read_metrics
from ._optim import learning_rate, make_optimizer
from ._rewards import (
    NON_POLICY_STATUSES,
    PLACEMENTS,
    DropCounter,
    Dropped,
    RewardConfig,
    place_rewards,
    turn_spans,
    verdict_reward,
)
from ._synthetic import SyntheticSource, synthetic_record
from ._update import TrainState, explained_variance

__all__ = [
    "MeshConfig",
    "MeshError",
    "build_mesh",
    "ADVANTAGES",
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "KL_PENALTIES",
    "NON_POLICY_STATUSES",
    "PLACEMENTS",
    "POLICY_LOSSES",
    "SEGMENT_AGGREGATIONS",
    "AdvantageConfig",
    "CheckpointDir",
    "DevicesConfig",
    "DistributedConfig",
    "DropCounter",
    "Dropped",
    "Learner",
    "LearnerConfig",
    "LossConfig",
    "MetricsWriter",
    "OptimConfig",
    "PackConfig",
    "RLBatch",
    "RewardConfig",
    "SegmentLayout",
    "RunConfig",
    "SyntheticSource",
    "TrainState",
    "aggregate",
    "allgather_objects",
    "apply_devices",
    "compute_advantages",
    "explained_variance",
    "gae",
    "grpo",
    "initialize_distributed",
    "is_primary",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "learning_rate",
    "make_optimizer",
    "masked_whiten",
    "pack_trajectories",
    "place_rewards",
    "plot_curves",
    "ppo_clip",
    "read_metrics",
    "restore_learner",
    "jitted_updates",
    "returns_to_go",
    "rloo",
    "save_learner",
    "sync",
    "synthetic_record",
    "train",
    "trloo",
    "turn_spans",
    "value_loss",
    "verdict_reward",
]
