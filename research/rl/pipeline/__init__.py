"""research.rl.pipeline: CUDA Agent's staged RL pipeline on the real agent loop (``env=agent``) or the toy
plan environment (``env=toy``).

    from research.rl.pipeline import PipelineConfig, run_pipeline
    run_pipeline(PipelineConfig(env="agent", tasks={"problems_dir": "problems"}, out_dir="runs/a"))
    manifests = run_pipeline(PipelineConfig(out_dir="runs/toy"))  # pretrain, warmup, rft, value, ppo

Stages (``stages.py``: init or pretrain, sft, warmup, rft, value, ppo) hand over checkpoints through JSON
manifests (``manifest.py``). Rollout sources return ``research.rollout.Trajectory`` records: the agent loop
(``agent_env.AgentEnv``: ``research.agent.run_episode`` with the Flax policy over the learner's weights,
in lockstep, k episodes per task) or the toy environment (``research.toyenv.rollout.ToyEnv``, re-exported
here with its observation vocabulary). ``sft.py`` renders demonstrations for the cold start; RFT filters are
pure functions (``filters.py``); ``export.py`` writes the final policy; ``demo.py`` is the time-boxed GPU
toy learning demonstration. With several JAX processes the rollouts are split across them
(``shares.py``). See docs/rl.md.

May import: ``research.rl``, ``research.rollout``, ``research.agent``, ``research.toyenv``, ``models``,
``kernels_env.client`` / ``session``, jax/flax/optax, numpy. Never imports hydra/omegaconf (the entry point
is ``experiments/train.py``).
"""

from research.rollout import RolloutConfig, read_trajectories
from research.toyenv import OBS_TOKENS, TOY_VOCAB, observation_tokens, speed_bucket, toy_tokenizer
from research.toyenv.rollout import ToyEnv, make_sampler

from .config import (
    CRITIC_FREE,
    STAGES,
    EvalConfig,
    MeshConfig,
    OverlapConfig,
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
    "OverlapConfig",
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
