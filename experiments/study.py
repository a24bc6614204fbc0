"""The study's evaluations: a policy on one protocol split (results rows, test splits touched once), and the
comparison of result files (docs/study_protocol.md, "Running the study").

    python -m experiments.study study.mode=fix study.protocol=P.json tasks.source=data tasks.path=DATA
    python -m experiments.study study.run=full-s0 study.split=test_seen study.train_config=runs/full-s0 \
        policy=flax policy.model=runs/full-s0/final_policy sandbox=gpu
    python -m experiments.study study.run=full-s0 study.split=dev study.decoding=sampled study.samples=8 ...
    python -m experiments.study study.mode=compare study.protocol=P.json study.runs=[FULL.json,SFT.json]

Eval writes <out_dir>/<run>.<split>.seed<seed>.json (study-results/1) and the episodes under sample<i>/.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, to_dataclass, user_errors
from experiments._policy import check_policy_overrides, run_config
from experiments._schemas import register
from research.agent import AgentConfigError, RunConfig
from research.evaluation.study_eval import StudyConfig


def to_config(cfg: DictConfig, out_dir: str = "outputs/study") -> tuple[StudyConfig, RunConfig]:
    """(the study's settings, the agent loop's); ``out_dir`` when the config leaves it null."""
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("hydra", None)
    study = to_dataclass(StudyConfig, node.pop("study"), where="study")
    node["out_dir"] = node.get("out_dir") or out_dir
    return study, run_config(node)


CONFIG_NAME = "study"
register(CONFIG_NAME)  # the groups' dataclasses as their schemas (conf/policy/flax.yaml's generation too)


@command_line_checked(CONFIG_NAME, check_policy_overrides)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from models import CheckpointError
    from research.evaluation import ProtocolError, ResultsError
    from research.evaluation.study_eval import StudyError, compare_results, evaluate_split, fix_protocol

    errors = (AgentConfigError, ProtocolError, ResultsError, StudyError, CheckpointError)
    paths = ["policy.script", "study.train_config"] + (["study.protocol"] if cfg.study.mode != "fix" else [])
    with user_errors(cfg, *errors, dirs={"tasks.problems_dir": None}, paths=paths):
        study, run = to_config(cfg, out_dir=HydraConfig.get().runtime.output_dir)
        if study.mode == "fix":
            fix_protocol(study, run.tasks)
        elif study.mode == "compare":
            compare_results(study)
        else:
            evaluate_split(study, run)


if __name__ == "__main__":
    main()
