"""Redraw a run's report figures without a notebook (PDF + PNG, the project style).

python -m experiments.figures run_dir=outputs/solutions/2026-12-01/10-00-00    # Table 1, claims
python -m experiments.figures run_dir=multirun/train/2026-12-01/10-00-00        # ablations, curves
python -m experiments.figures run_dir=RUN audit=audit.json out_dir=paper/figs
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, to_dataclass, user_errors
from experiments._schemas import register
from research.evaluation.figures import FiguresConfig


def to_config(cfg: DictConfig) -> FiguresConfig:
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("hydra", None)
    return to_dataclass(FiguresConfig, node, where="figures")


CONFIG_NAME = "figures"
register(CONFIG_NAME)  # each group's dataclass as its schema (experiments._schemas)


@command_line_checked(CONFIG_NAME)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from research.evaluation.figures import run_figures

    with user_errors(cfg, dirs={"run_dir": None}, paths=["audit"]):
        run_figures(to_config(cfg))


if __name__ == "__main__":
    main()
