"""The agent policy's config node, shared by the mains that run the agent loop (agent, study): each policy's
dataclass (``research.agent.POLICIES``) is the schema of ``conf/policy/<name>.yaml`` (registered here as
``policy/<name>_schema``, so Hydra checks its overrides), and ``run_config`` fills the one the node names."""

from __future__ import annotations

from typing import Any

from hydra.core.config_store import ConfigStore

from experiments._hydra import to_dataclass
from research.agent import POLICIES, RunConfig
from research.agent.policies import check_settings

for _name, _spec in POLICIES.items():
    ConfigStore.instance().store(group="policy", name=f"{_name}_schema", node=_spec.config)


def run_config(node: dict[str, Any]) -> RunConfig:
    """The ``RunConfig`` of a resolved root node (policy, agent, tasks, sandbox, judge, out_dir, ...): the
    policy's dataclass picked by its ``name``; a setting it lacks: one line naming the key and the policy."""
    policy = dict(node.pop("policy", None) or {})
    config = check_settings(str(policy.get("name", "")), policy)
    run = to_dataclass(RunConfig, node, where="agent/tasks/sandbox/judge")
    run.policy = to_dataclass(config, policy, where="policy")
    return run
