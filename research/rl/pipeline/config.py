"""Typed configs of the staged pipeline (Hydra fills them in experiments/train.py, never here).

Defaults are sized for the GPU toy run; ``conf/preset/toy_cpu.yaml`` shrinks them for CPU. Learning
rates of the toy policy are far above the paper's (3e-6 / 6e-6 for a 32B model): a 3M-parameter model
trained from scratch moves at 1e-5 .. 1e-4.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from kernels_env.client import JudgeConfig, SandboxConfig
from models import ModelConfig, ModelSpec
from research.agent import TasksConfig
from research.rollout import RolloutConfig
from research.toyenv import CorpusConfig, ToyTaskConfig

from .._config import AdvantageConfig, LearnerConfig, LossConfig, OptimConfig
from .._devices import DevicesConfig
from .._distributed import DistributedConfig
from .._mesh import MeshConfig
from .._rewards import RewardConfig
from .._update import tis_enabled
from .agent_env import AgentEnvConfig
from .filters import RFTFilterConfig
from .overlap import OverlapConfig
from .pretrain import PretrainConfig
from .sft import SFTConfig

STAGES = ("sft", "warmup", "rft", "value", "ppo")  # sft: env=agent with sft.demos only
ENVS = ("agent", "toy")  # agent: the real agent loop on kernel tasks; toy: the toy plan environment


def task_config(env: str, tasks: Any):
    """The typed task config of ``env`` from a dict (Hydra's node) or None (its defaults): the agent
    loop's ``research.agent.TasksConfig`` (a KernelBench directory, a research.data dataset, toy tasks
    as problems) or the toy environment's ``ToyTaskConfig``."""
    kind = TasksConfig if env == "agent" else ToyTaskConfig
    if isinstance(tasks, kind):
        return tasks
    if is_dataclass(tasks):
        tasks = asdict(tasks)
    tasks = dict(tasks or {})
    names = set(kind.__dataclass_fields__)
    unknown = sorted(set(tasks) - names)
    if unknown:
        raise ValueError(
            f"tasks.{unknown[0]} is not a setting of env={env}'s tasks ({kind.__name__}: {sorted(names)})"
        )
    return kind(**tasks)


def toy_model() -> ModelSpec:
    """The toy policy of the GPU demonstration (``conf/model/toy.yaml`` for Hydra runs; a test keeps the two
    equal): the toy tokenizer's 91 tokens, 4 Qwen3 layers of width 256 (3.2M parameters), fp32 throughout
    (a 3M model gains nothing from bf16 and its RL updates are small)."""
    arch = ModelConfig(
        family="qwen3",
        vocab_size=91,
        hidden_size=256,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        head_dim=64,
        intermediate_size=768,
        tie_word_embeddings=True,
        qk_norm=True,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_ids=(2,),
        pad_token_id=0,
    )
    return ModelSpec(
        arch=arch, param_dtype="float32", compute_dtype="float32", attention_impl="xla", remat="none"
    )


CRITIC_FREE = ("grpo", "rloo", "trloo")


def _learner(actor_lr: float, critic_lr: float, **kw) -> LearnerConfig:
    return LearnerConfig(
        actor=OptimConfig(lr=actor_lr), critic=OptimConfig(lr=critic_lr), loss=LossConfig(), **kw
    )


@dataclass
class PPOConfig:
    """Stage 4: multi-turn PPO from the RFT actor and the pretrained critic."""

    steps: int = 20
    rollout: RolloutConfig = field(default_factory=lambda: RolloutConfig(turns=3, episodes=128, seed=3))
    learner: LearnerConfig = field(default_factory=lambda: _learner(2e-5, 1e-4))
    save_every: int = 10


@dataclass
class WarmupConfig(PPOConfig):
    """Stage 1: single-turn PPO from the pretrained policy (stage 4's settings, its own defaults)."""

    rollout: RolloutConfig = field(default_factory=lambda: RolloutConfig(turns=1, episodes=128, seed=1))
    learner: LearnerConfig = field(default_factory=lambda: _learner(3e-5, 1e-4))


@dataclass
class RFTConfig:
    """Stage 2: sample multi-turn trajectories with the stage-1 policy, filter, NLL on the kept ones.
    ``enabled=False`` (the ``no_rft`` ablation) still samples them (value pretraining needs them) and hands
    the stage-1 actor on unchanged."""

    enabled: bool = True
    rollout_batches: int = 4
    rollout: RolloutConfig = field(default_factory=lambda: RolloutConfig(turns=3, episodes=128, seed=2))
    filters: RFTFilterConfig = field(default_factory=RFTFilterConfig)
    epochs: int = 2
    batch_size: int = 64
    learner: LearnerConfig = field(default_factory=lambda: _learner(5e-5, 1e-4))
    save_every: int = 10


@dataclass
class ValueConfig:
    """Stage 3: the critic (initialised from the RFT actor) towards GAE targets on the stage-2
    trajectories, the policy frozen; ``on``: ``all`` sampled (not dropped) or only ``accepted`` ones."""

    enabled: bool = True
    steps: int = 20
    batch_size: int = 64
    on: str = "all"
    learner: LearnerConfig = field(default_factory=lambda: _learner(3e-5, 1e-4))
    save_every: int = 10


@dataclass
class EvalConfig:
    """Evaluation of a stage's policy: greedy, one episode per task, judged fresh (no cache)."""

    enabled: bool = False
    splits: list[str] = field(default_factory=lambda: ["test", "heldout_category"])
    turns: int = 3
    fresh: bool = True
    # With ``fresh``: evaluations before the last stage's may reuse verdicts of the same plan under the same
    # judge settings (their own cache file, ``<judge_cache>_eval``); the last stage's is always judged fresh.
    cache_until_final: bool = False
    max_tasks: int = 0  # 0: every task of each split
    judge: JudgeConfig | None = None  # None: the training judge's settings


@dataclass
class PipelineConfig:
    out_dir: str = "runs/train"
    pipeline: str = "staged"  # staged: every stage of ``stages`` in order
    stage: str | None = None  # one stage alone (needs ``init`` unless it is the warm-up)
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    init: str | None = None  # a manifest to start from (a stage run alone); None: pretrain first
    env: str = "toy"  # agent | toy (ENVS)
    model: ModelSpec = field(default_factory=ModelSpec)
    # env=agent: research.agent.TasksConfig; env=toy: ToyTaskConfig (``task_config`` types a dict)
    tasks: Any = None
    agent: AgentEnvConfig = field(default_factory=AgentEnvConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)  # cold start on demonstrations (env=agent)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    judge_cache: str | None = "judge_cache.jsonl"  # relative to out_dir; null: no cache
    cpu_task_rows: int = 6  # CPU mode judges every task at cpu_size(task, rows)
    reward: RewardConfig = field(default_factory=RewardConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    rft: RFTConfig = field(default_factory=RFTConfig)
    value: ValueConfig = field(default_factory=ValueConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    # The warm-up's and PPO's rollouts generated in a background thread while the learner updates (one step
    # off-policy by default; docs/rl.md "Overlapping rollouts and learning"). Off: on-policy, as before.
    overlap: OverlapConfig = field(default_factory=OverlapConfig)
    # Sequence packing in every learner stage (docs/rl.md "Learner at size"): several trajectories per row of
    # the stage's max_len, B a bucket of mini- x micro-batches x row shards (stages._pack). Off: padded.
    packing: bool = False
    seed: int = 0  # the run's seed: added to every seed below (model, pretraining, rollouts, learners)
    skills: bool = False  # the toy environment has no skill library (see docs/rl.md)
    time_budget_s: float | None = None  # stop cleanly (checkpoint + manifest) when it runs out
    progress: bool = True
    tensorboard: bool = True  # TensorBoard events beside metrics.jsonl (tensorboardX)
    export: bool = True  # the last stage's actor to <out_dir>/final_policy (research.rl.pipeline.export)
    # Applied by experiments/train.py before JAX starts (research.rl.apply_devices, initialize_distributed).
    devices: DevicesConfig = field(default_factory=DevicesConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    # The mesh every learner of the pipeline (pretraining included) shards over (models' rules); the
    # samplers decode from the same sharded arrays. Default: one device, as before; conf/mesh/auto.yaml:
    # every local device on fsdp.
    mesh: MeshConfig = field(default_factory=MeshConfig)

    def seeded(self) -> PipelineConfig:
        """This configuration with ``seed`` added to each seed it holds (a copy; seed 0 changes nothing), so
        ``seed=0,1,2`` in a sweep gives independent runs of one configuration."""
        out = copy.deepcopy(self)
        out.model.seed += self.seed
        out.pretrain.seed += self.seed
        for stage in (out.warmup, out.rft, out.value, out.ppo):
            for part in ("rollout", "learner"):
                if hasattr(stage, part) and hasattr(getattr(stage, part), "seed"):
                    getattr(stage, part).seed += self.seed
        return out

    def __post_init__(self) -> None:
        if self.env not in ENVS:
            raise ValueError(f"env must be one of {ENVS}, got {self.env!r}")
        self.tasks = task_config(self.env, self.tasks)
        self._check_protocol()
        if self.sft.demos and self.env != "agent":
            raise ValueError("sft.demos: cold-start SFT renders agent conversations; it needs env=agent")
        if self.env == "toy":  # no conversations to clone: pretraining is the toy policy's start
            self.stages = [s for s in self.stages if s != "sft"]
        if self.pipeline != "staged":
            raise ValueError(f"pipeline must be 'staged' (the only pipeline), got {self.pipeline!r}")
        if self.stage is not None:
            if self.stage not in STAGES:
                raise ValueError(f"stage must be one of {STAGES}, got {self.stage!r}")
            self.stages = [self.stage]
        bad = [s for s in self.stages if s not in STAGES]
        if bad:
            raise ValueError(f"unknown stages {bad}; known: {STAGES}")
        if self.skills:
            raise ValueError(
                "skills=true: the toy environment has no skill library (it is the chat agent's, "
                "research.agent); the no_skills ablation is the toy pipeline's only mode"
            )
        if self.devices.judge_gpus is not None:
            if self.sandbox.gpus is not None and list(self.sandbox.gpus) != list(self.devices.judge_gpus):
                raise ValueError(
                    f"devices.judge_gpus {self.devices.judge_gpus} and sandbox.gpus {self.sandbox.gpus} "
                    "disagree: set one of them"
                )
            self.sandbox.gpus = list(self.devices.judge_gpus)  # the sandbox reads its own config only
        for name in ("warmup", "ppo"):  # the learner's log-probs at the temperature the sampler used
            stage = getattr(self, name)
            loss = stage.learner.loss
            if loss.temperature is None:
                loss.temperature = stage.rollout.temperature
            elif loss.temperature != stage.rollout.temperature:
                raise ValueError(
                    f"{name}.learner.loss.temperature={loss.temperature} differs from "
                    f"{name}.rollout.temperature={stage.rollout.temperature}: the learner must score "
                    "tokens at the sampling temperature (set only the rollout's)"
                )
        for name in ("warmup", "ppo"):  # one line now, not a trace-time error inside the first update
            tis_enabled(getattr(self, name).learner)
        if self.env == "agent" and self.agent.generation.backend == "engine":  # pages for one context
            for name in ("warmup", "rft", "ppo"):
                self.agent.generation.engine_config(getattr(self, name).rollout.max_len, where="agent")
        if self.value.on not in ("all", "accepted"):
            raise ValueError(f"value.on must be all or accepted, got {self.value.on!r}")
        if -1 not in self.mesh.sizes():  # else once the device count is known (run_pipeline)
            self.check_mesh_rows(self.mesh)

    def _check_protocol(self) -> None:
        """A study protocol (``tasks.protocol``): rollouts on ``train``, the in-pipeline evaluation on
        ``dev`` only (the test splits are evaluated once, after training: ``experiments.study``)."""
        if self.env != "agent" or not self.tasks.protocol:
            return
        for name in ("warmup", "rft", "ppo"):
            split = getattr(self, name).rollout.split
            if split != "train":
                raise ValueError(f"{name}.rollout.split={split}: with tasks.protocol rollouts use train only")
        if self.eval.enabled and list(self.eval.splits) != ["dev"]:
            raise ValueError(
                f"eval.splits={list(self.eval.splits)}: with tasks.protocol the in-pipeline evaluation uses "
                "the dev split only (set eval.splits=[dev])"
            )

    def check_mesh_rows(self, mesh: MeshConfig) -> None:
        """Every batch a learner of this run shards must split over ``mesh``'s row shards (MeshError
        naming the batch-size field otherwise)."""
        splits = lambda lc: lc.minibatches * lc.micro_batches
        if self.init is None:
            mesh.check_rows("pretrain.batch_size", self.pretrain.batch_size)
        rows = {
            "sft": ("sft.batch_size", self.sft.batch_size, self.sft.learner),
            "warmup": ("warmup.rollout.episodes", self.warmup.rollout.episodes, self.warmup.learner),
            "rft": ("rft.batch_size", self.rft.batch_size, self.rft.learner),
            "value": ("value.batch_size", self.value.batch_size, self.value.learner),
            "ppo": ("ppo.rollout.episodes", self.ppo.rollout.episodes, self.ppo.learner),
        }
        for stage in self.stages:
            off = {"rft": not self.rft.enabled, "value": not self.value.enabled, "sft": not self.sft.demos}
            if off.get(stage):
                continue  # no learner runs (a disabled RFT still samples, unsharded batches)
            name, n, lc = rows[stage]
            mesh.check_rows(name, n, splits(lc))


__all__ = [
    "CRITIC_FREE",
    "STAGES",
    "AdvantageConfig",
    "EvalConfig",
    "MeshConfig",
    "OverlapConfig",
    "PPOConfig",
    "PipelineConfig",
    "RFTConfig",
    "ValueConfig",
    "WarmupConfig",
]
