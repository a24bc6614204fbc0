"""Agent policies by name (research.agent.POLICIES), each with its own typed config: the YAML of
conf/policy/ selects one and repeats none of its defaults; a setting a policy lacks is one line naming the
key and the policy, from the library and from a config node."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from experiments._hydra import CONF
from research.agent import (
    POLICIES,
    AgentConfigError,
    FlaxPolicyConfig,
    OpenAIPolicyConfig,
    ScriptedPolicyConfig,
    ToyPolicyConfig,
    make_policy,
    policy_config,
)

CONFIGS = {
    "openai": OpenAIPolicyConfig,
    "flax": FlaxPolicyConfig,
    "scripted": ScriptedPolicyConfig,
    "toy": ToyPolicyConfig,
}


def test_each_policy_is_registered_with_its_own_config():
    assert {name: spec.config for name, spec in POLICIES.items()} == CONFIGS
    assert policy_config("flax", max_tokens=8) == FlaxPolicyConfig(max_tokens=8)
    assert "script" not in {f.name for f in dataclasses.fields(FlaxPolicyConfig)}  # no shared flat config


def test_a_setting_the_policy_lacks_is_one_line_naming_key_and_policy():
    with pytest.raises(AgentConfigError) as err:
        policy_config("openai", dtype="float32")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("policy=openai has no setting 'dtype' (its settings: name, model, base_url")
    with pytest.raises(AgentConfigError, match="policy must be one of"):
        policy_config("gpt")
    with pytest.raises(AgentConfigError, match="configures policy=flax, got name='openai'"):
        FlaxPolicyConfig(name="openai")
    with pytest.raises(AgentConfigError, match="policy=toy: turns must be >= 1, got 0"):
        ToyPolicyConfig(turns=0)
    with pytest.raises(AgentConfigError, match="policy=openai needs policy.model"):
        make_policy(OpenAIPolicyConfig())


def test_a_config_node_with_a_foreign_key_is_one_line(tmp_path):
    from experiments._policy import run_config

    node = {"policy": {"name": "flax", "script": "x.json"}, "out_dir": str(tmp_path)}
    with pytest.raises(AgentConfigError, match="^policy=flax has no setting 'script' "):
        run_config(node)
    run = run_config({"policy": {"name": "flax", "max_tokens": 7}, "out_dir": str(tmp_path)})
    assert run.policy == FlaxPolicyConfig(max_tokens=7)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_yaml_repeats_no_default_of_the_dataclass(name):
    raw = OmegaConf.to_container(OmegaConf.load(f"{CONF}/policy/{name}.yaml"))
    defaults = raw.pop("defaults")
    assert defaults[0] == f"{name}_schema"  # the dataclass is the node's schema and the home of its defaults
    assert raw == {}, f"conf/policy/{name}.yaml repeats settings of {CONFIGS[name].__name__}: {raw}"


@pytest.mark.parametrize(
    ("entry", "argv", "line"),
    [
        ("agent", ["policy=openai", "policy.dtype=float32"], "policy=openai has no setting 'dtype'"),
        ("agent", ["+policy.script=x.json"], "policy=toy has no setting 'script'"),  # the root's default
        (
            "study",
            ["-m", "policy=scripted,flax", "policy.script=x.json"],
            "policy=flax has no setting 'script'",
        ),
    ],
)
def test_a_command_line_setting_the_policy_lacks_is_one_line_exit_2(
    entry, argv, line, tmp_path, monkeypatch, capsys
):
    from tests.hydra_mains import run_main

    run_dir = tmp_path / "run"
    argv = [*argv, f"hydra.run.dir={run_dir}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    assert run_main(entry, argv, monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {line} (its settings: name, ") and err.count("\n") == 1
    assert not run_dir.exists() and not (tmp_path / "sweep").exists()


def test_the_settings_a_policy_has_pass_the_command_line_check():
    from experiments._policy import check_policy_overrides

    check_policy_overrides("agent", ["policy=flax", "policy.generation.backend=engine", "~policy.seed"])
    check_policy_overrides("study", ["policy.model=runs/x", "policy=nope", "policy.anything=1"])  # Hydra's
