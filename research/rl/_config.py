"""Typed configs of the learner (plain dataclasses: Hydra fills them in experiments/, never here).

Defaults are CUDA Agent's where the paper states them (cuda_agent.md section 4: gamma 1, lambda 0.95,
clip 0.2 / 0.28, actor lr 3e-6, critic lr 6e-6) and verl's otherwise (AdamW betas, weight decay, clip norm).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AdvantageConfig:
    estimator: str = "gae"  # gae | grpo | rloo | trloo (research.rl.ADVANTAGES)
    gamma: float = 1.0  # per policy token (observation tokens are skipped, not discounted)
    lam: float = 0.95
    whiten: bool = True  # gae: normalise advantages over the batch's policy tokens (verl's default)
    norm_by_std: bool = True  # grpo: divide by the group's standard deviation
    eps: float = 1e-6
    max_turns: int = 64  # trloo: turns per trajectory (static shape of the per-turn tables)


@dataclass
class LossConfig:
    policy_loss: str = "ppo"  # ppo | reinforce (research.rl.POLICY_LOSSES)
    eps_low: float = 0.2
    eps_high: float = 0.28  # clip-higher (DAPO): more room for raising unlikely tokens
    dual_clip: float | None = None  # e.g. 3.0: bound -A * ratio by -A * c when A < 0
    value_clip: float | None = 0.2  # None: plain MSE
    entropy_coef: float = 0.0
    kl_penalty: str = "none"  # none | k1_reward | k3_loss
    kl_coef: float = 0.0
    aggregation: str = "token_mean"  # token_mean | seq_mean_token_mean | seq_mean_token_sum
    # The sampler's: log-probs are of log_softmax(logits / T). None: 1.0 in a learner of its own; the staged
    # pipeline sets each stage's to its rollout's sampling temperature (one home for it).
    temperature: float | None = None
    # Truncated importance sampling of the sampler/learner gap (verl's TIS): each token's policy-gradient
    # term times min(exp(old learner log-prob - sampler log-prob), tis_cap). None or 0: off. Needs
    # LearnerConfig.old_logprobs=recompute (with the sampler's as old log-probs there is no gap to weigh).
    tis_cap: float | None = None


@dataclass
class OptimConfig:
    lr: float = 3e-6
    schedule: str = "constant"  # constant | cosine | linear (after warmup)
    warmup_steps: int = 0
    total_steps: int = 1000  # horizon of the cosine / linear decay
    min_lr_ratio: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0


@dataclass
class LearnerConfig:
    actor: OptimConfig = field(default_factory=OptimConfig)
    critic: OptimConfig = field(default_factory=lambda: OptimConfig(lr=6e-6))
    loss: LossConfig = field(default_factory=LossConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    micro_batches: int = 1  # gradient accumulation: each optimizer step sums this many micro-batches
    # Or a token budget: as many micro-batches as keep rows x T <= this (micro_batches must stay 1).
    micro_batch_tokens: int | None = None
    minibatches: int = 1  # optimizer steps per epoch over a rollout batch
    epochs: int = 1  # PPO epochs over a rollout batch
    chunk_size: int = 1024  # tokens per log-prob chunk ([chunk, V] fp32 logits at most)
    old_logprobs: str = "recompute"  # recompute (learner's forward) | sampler (the record's log-probs)
    seed: int = 0
