"""research.rl.pipeline: CUDA Agent's staged RL pipeline on the toy kernel environment.

    from research.rl.pipeline import PipelineConfig, run_pipeline
    manifests = run_pipeline(PipelineConfig(out_dir="runs/toy"))  # pretrain, warmup, rft, value, ppo

Stages (``stages.py``) hand over ``models`` checkpoints through JSON manifests (``manifest.py``); rollouts
are token-level episodes of the toy environment (``research.toyenv.rollout.ToyEnv``, re-exported here with
its observation vocabulary: plan -> verdict observation -> revised plan; ``research.rollout.Trajectory``
records) judged by the real sandbox through ``research.toyenv.PlanJudge``; RFT filters are pure functions
(``filters.py``); ``demo.py`` is the time-boxed GPU learning demonstration. With several JAX processes the
rollouts are split across them (``shares.py``). See docs/rl.md.

May import: ``research.rl``, ``research.toyenv``, ``models``, ``kernels_env.client``, jax/flax/optax, numpy.
Never imports hydra/omegaconf (the entry point is ``experiments/train.py``).
"""

from research.rollout import RolloutConfig, read_trajectories
from research.toyenv import OBS_TOKENS, TOY_VOCAB, observation_tokens, speed_bucket, toy_tokenizer
from research.toyenv.rollout import ToyEnv, make_sampler

from .config import (
    CRITIC_FREE,
    STAGES,
    EvalConfig,
    MeshConfig,
    PipelineConfig,
    PPOConfig,
    RFTConfig,
    ValueConfig,
    WarmupConfig,
)
from .evaluate import evaluate_policy
from .filters import (
    RFTFilterConfig,
    episode_reward,
    has_hallucination,
    has_invalid_action,
    has_redundant_loop,
    rejection_reason,
    rft_filter,
)
from .manifest import Manifest, config_hash, stage_line
from .pipeline import run_pipeline
from .pretrain import PretrainConfig, encode_corpus, pretrain
from .rollout_metrics import rollout_metrics
from .runtime import DeadlineReached, Runtime, build_policy
from .shares import SharedEnv, split_env
from .stages import STAGE_FNS, run_ppo, run_pretrain, run_rft, run_value, run_warmup

__all__ = [
    "CRITIC_FREE",
    "OBS_TOKENS",
    "STAGES",
    "STAGE_FNS",
    "SharedEnv",
    "TOY_VOCAB",
    "DeadlineReached",
    "EvalConfig",
    "MeshConfig",
    "Manifest",
    "PPOConfig",
    "PipelineConfig",
    "PretrainConfig",
    "RFTConfig",
    "RFTFilterConfig",
    "RolloutConfig",
    "Runtime",
    "ToyEnv",
    "ValueConfig",
    "WarmupConfig",
    "build_policy",
    "config_hash",
    "encode_corpus",
    "episode_reward",
    "evaluate_policy",
    "has_hallucination",
    "has_invalid_action",
    "has_redundant_loop",
    "make_sampler",
    "observation_tokens",
    "pretrain",
    "read_trajectories",
    "rejection_reason",
    "rft_filter",
    "rollout_metrics",
    "run_pipeline",
    "run_ppo",
    "run_pretrain",
    "run_rft",
    "run_value",
    "run_warmup",
    "speed_bucket",
    "split_env",
    "stage_line",
    "toy_tokenizer",
]
