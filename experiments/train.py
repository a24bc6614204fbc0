"""CUDA Agent's staged RL pipeline (research.rl.pipeline): the real agent loop (env=agent) or the toy plan
environment (env=toy, the default).

    python -m experiments.train env=agent preset=agent_cpu model=hf model.checkpoint=CKPT \
        tasks.problems_dir=DIR sft.demos=RUN/trajectories.jsonl out_dir=OUT   # every stage + export, CPU

    python -m experiments.train env=agent tasks=data tasks.path=DATA tasks.protocol=P.json eval.splits=[dev] \
        out_dir=runs/full-s0                                  # a study run: train/dev of a fixed protocol
    python -m experiments.train preset=toy_cpu out_dir=runs/toy_cpu         # pretrain + 4 stages on CPU
    python -m experiments.train out_dir=runs/toy ablation=no_rft             # GPU sizes, one ablation
    python -m experiments.train stage=rft init=runs/toy/warmup/manifest.json out_dir=runs/toy
    python -m experiments.train model=hf model.checkpoint=/ckpt/qwen2-tiny out_dir=runs/hf
    python -m experiments.train devices.learner_gpus=[0,1] devices.judge_gpus=[2,3] out_dir=runs/split
    python -m experiments.train mesh=auto out_dir=runs/fsdp            # learners sharded over every GPU
    python -m experiments.train mesh.fsdp=4 mesh.data=2 out_dir=runs/m  # an explicit (data, fsdp) mesh

Writes <out_dir>/config.yaml (the composed config, resolved), <out_dir>/<stage>/ (metrics.jsonl, TensorBoard,
curves.png, checkpoints/, manifest.json) and <out_dir>/pipeline.json; reruns skip finished stages and resume
the one in progress. The console gets one line per stage: its metrics, or why it learned nothing.
"""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, ConfigError, save_config, to_dataclass, user_errors
from experiments._schemas import register
from research.rl.pipeline.config import PipelineConfig

CONFIG_NAME = "train"
register(CONFIG_NAME)  # PipelineConfig as train_schema, each group's dataclass as its schema


def to_config(cfg: DictConfig) -> PipelineConfig:
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("hydra", None)
    node.pop("preset", None)
    node.pop("ablation", None)
    where = "train/model/sandbox/judge/preset/ablation/distributed/mesh"
    return to_dataclass(PipelineConfig, node, where=where)


def start_jax(config: PipelineConfig) -> None:
    """Device selection and jax.distributed, before anything makes JAX create its backends (both are read
    then); the judge GPUs already sit in config.sandbox (PipelineConfig copies them)."""
    from research.rl import apply_devices, initialize_distributed

    apply_devices(config.devices)
    initialize_distributed(config.distributed)


@command_line_checked(CONFIG_NAME)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from models import CheckpointError, UnsupportedModelError
    from research.agent.policies.chat import TemplateError
    from research.evaluation import ProtocolError
    from research.rl import MeshError
    from research.rl.pipeline import run_pipeline, stage_line
    from research.rl.pipeline.sft import DemoFileError
    from research.rollout import TrajectoryError

    errors = (CheckpointError, UnsupportedModelError, MeshError, TemplateError, DemoFileError)
    errors += (TrajectoryError, ProtocolError)

    logging.getLogger("absl").setLevel(logging.WARNING)  # Orbax logs every save at INFO under Hydra
    with user_errors(cfg, *errors, paths=["init", "model.checkpoint", "sft.demos"]):
        if HydraConfig.get().runtime.choices.get("model") == "hf" and not cfg.model.checkpoint:
            # (conf/model/hf.yaml's ??? cannot survive the merge onto the schema's default None)
            raise ConfigError("model=hf needs model.checkpoint=DIR (a local Hugging Face checkpoint)")
        config = to_config(cfg)
        save_config(cfg, config.out_dir)
        start_jax(config)
        manifests = run_pipeline(config)
    for name, m in manifests.items():
        print(stage_line(name, m))
    print(f"config, manifests and metrics under {config.out_dir}")


if __name__ == "__main__":
    main()
