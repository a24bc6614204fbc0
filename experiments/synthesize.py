"""Synthesize a dataset of KernelBench-format operator tasks (CUDA-Agent-Ops-6K style), filtered and split.

    python -m experiments.synthesize num_tasks=6000 out_dir=data/ops6k
    python -m experiments.synthesize num_tasks=200 out_dir=/tmp/ops data/mix=curriculum data/split=random
    python -m experiments.synthesize out_dir=data/ops6k filters.decontam_dir=$KERNELBENCH_DIR/KernelBench
    python -m experiments.synthesize out_dir=data/ops6k filters.gpu.enabled=true   # on a GPU machine

Parallel (worker processes), resumable (re-run the same command), with a progress bar. Writes tasks/*.py,
tasks.jsonl, manifest.json and summary.png into out_dir.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, to_dataclass, user_errors
from experiments._schemas import register
from research.data.config import SynthesisConfig, SynthesisConfigError

CONFIG_NAME = "synthesize"
register(CONFIG_NAME)  # each group's dataclass as its schema (experiments._schemas)


def to_config(cfg: DictConfig) -> SynthesisConfig:
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("hydra", None)
    data = node.pop("data", {}) or {}
    node["mix"], node["split"] = data.get("mix", {}), data.get("split", {})
    return to_dataclass(SynthesisConfig, node, where="synthesize")


@command_line_checked(CONFIG_NAME)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from research.data.synthesize import synthesize

    with user_errors(cfg, SynthesisConfigError, dirs={"filters.decontam_dir": None}):
        manifest = synthesize(to_config(cfg))
    print(
        f"{manifest['num_tasks']} tasks from {manifest['candidates']} candidates in {manifest['out_dir']}; "
        f"drops: {manifest['drop_reasons']}"
    )


if __name__ == "__main__":
    main()
