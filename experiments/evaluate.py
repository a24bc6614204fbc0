"""Main job: evaluate an evaluation set's solutions in the sandbox (`make examples`).

    python -m experiments.evaluate                       # built-in examples, CPU mode without a GPU
    python -m experiments.evaluate eval=kernelbench eval.solutions_dir=runs/sols sandbox=gpu
    python -m experiments.evaluate -m +sweep=protocols   # Hydra multirun ablation

Writes results.jsonl (one verdict per solution, resumable) and summary.json into the run directory.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, to_dataclass, user_errors
from experiments._schemas import register
from kernels_env.rules.config import BatchConfig


def to_config(cfg: DictConfig, out_dir: str = ".") -> BatchConfig:
    node = OmegaConf.to_container(cfg.eval, resolve=True)
    node.update(sandbox=cfg.sandbox, judge=cfg.judge, out_dir=out_dir)
    return to_dataclass(BatchConfig, node, where="eval/sandbox/judge")


CONFIG_NAME = "config"
register(CONFIG_NAME)  # each group's dataclass as its schema (experiments._schemas)


@command_line_checked(CONFIG_NAME)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from kernels_env.reports.batch import BatchInputError, run_batch

    with user_errors(cfg, BatchInputError, dirs={"eval.problems_dir": "*.py", "eval.solutions_dir": None}):
        run_batch(to_config(cfg, out_dir=HydraConfig.get().runtime.output_dir))


if __name__ == "__main__":
    main()
