"""The agent policy's config node, shared by the mains that run the agent loop (agent, study): each policy's
dataclass (``research.agent.POLICIES``) is the schema of ``conf/policy/<name>.yaml`` (registered here as
``policy/<name>_schema``, so Hydra checks its overrides), ``run_config`` fills the one the node names, and
``check_policy_overrides`` names a command-line setting the chosen policy lacks, sweeps included
(``experiments._command_line`` makes it one line, exit 2, before Hydra composes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf

from experiments._hydra import CONF, to_dataclass
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


def _root_policy(root: str) -> str | None:
    for item in OmegaConf.load(Path(CONF) / f"{root}.yaml").get("defaults", []):
        if not isinstance(item, str) and "policy" in item:
            return str(item["policy"])
    return None


def check_policy_overrides(root: str, argv: list[str]) -> None:
    """An ``AgentConfigError`` naming the first ``policy.KEY`` override (added or set) that a chosen policy
    (``policy=NAME``, each of a sweep's, else the root config's default) has no setting for."""
    try:
        overrides = OverridesParser.create().parse_overrides([a for a in argv if not a.startswith("-")])
    except HydraException:
        return  # not an override Hydra can read: Hydra says so itself
    chosen = [_root_policy(root)]
    for o in overrides:
        if o.key_or_group == "policy" and o.package is None and not o.is_delete():
            chosen = list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(o.value())]
    for o in overrides:
        if o.key_or_group.startswith("policy.") and not o.is_delete():
            for name in chosen:
                if name in POLICIES:  # an unknown policy: Hydra lists the options
                    check_settings(name, [o.key_or_group.split(".")[1]])
