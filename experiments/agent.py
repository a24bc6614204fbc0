"""The agent loop over a task set: every problem an episode of a policy in the sandbox.

    python -m experiments.agent          # the shipped toy policy on held-out toy tasks (`make demo`)
    python -m experiments.agent policy=openai policy.model=gpt-x policy.base_url=http://127.0.0.1:8000/v1 \
        policy.api_key_env=MY_KEY tasks.problems_dir=KernelBench/level1 sandbox=gpu
    python -m experiments.agent policy=flax policy.model=qwen2_0_5b_random agent=train agent.skills=false
    python -m experiments.agent policy=scripted policy.script=demo.json sandbox=cpu agent.max_turns=5

Writes results.jsonl, trajectories.jsonl and summary.json (Table 1 per level) into out_dir; resumes.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments._command_line import command_line_checked
from experiments._hydra import CONF, user_errors
from experiments._policy import check_policy_overrides, run_config
from experiments._schemas import register
from research.agent import AgentConfigError, RunConfig


def to_config(cfg: DictConfig, out_dir: str = "outputs/agent") -> RunConfig:
    """``out_dir``: where results go when the config leaves ``out_dir`` null (main: the Hydra run dir)."""
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("hydra", None)
    node["out_dir"] = node.get("out_dir") or out_dir
    return run_config(node)


CONFIG_NAME = "agent"
register(CONFIG_NAME)  # the groups' dataclasses as their schemas (conf/policy/flax.yaml's generation too)


@command_line_checked(CONFIG_NAME, check_policy_overrides)
@hydra.main(config_path=CONF, config_name=CONFIG_NAME, version_base="1.3")
def main(cfg: DictConfig) -> None:
    from research.agent import run_agent

    with user_errors(cfg, AgentConfigError, dirs={"tasks.problems_dir": None}, paths=["policy.script"]):
        run_agent(to_config(cfg, out_dir=HydraConfig.get().runtime.output_dir))


if __name__ == "__main__":
    main()
