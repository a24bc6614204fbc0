"""Judge a released set of KernelBench solutions and report claimed vs measured speedups per source.

    python -m experiments.solutions input=set.jsonl out_dir=runs/set                  # default field names
    python -m experiments.solutions input=set.parquet mapping=per_task mapping.source=model sandbox=gpu
    python -m experiments.solutions input=set.json mapping.code=kernel mapping.problem_name=task \
        kernelbench_dir=/data/KernelBench judge=cuda_agent audit=audit.json

Writes the batch layout, results.jsonl (resumable), import.json, claims.json and table1.json into out_dir.
Errors a user can cause (missing checkout, unmapped field) print one line and exit 2.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, to_dataclass, user_errors
from experiments._schemas import register
from research.evaluation import KernelBenchNotFound, SolutionSetConfig, SolutionSetError


def to_config(cfg: DictConfig, out_dir: str = "outputs/solutions") -> SolutionSetConfig:
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("hydra", None)
    node["fields"] = node.pop("mapping")
    node["out_dir"] = node.get("out_dir") or out_dir
    return to_dataclass(SolutionSetConfig, node, where="solutions/mapping/sandbox/judge")


CONFIG_NAME = "solutions"
register(CONFIG_NAME)  # each group's dataclass as its schema (experiments._schemas)


@command_line_checked(CONFIG_NAME)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from research.evaluation import evaluate_solution_set

    with user_errors(cfg, KernelBenchNotFound, SolutionSetError, paths=["input", "audit"]):
        evaluate_solution_set(to_config(cfg, out_dir=HydraConfig.get().runtime.output_dir))


if __name__ == "__main__":
    main()
