"""Every Hydra root config, every option of every config group it uses, and every sweep preset composes and
fills the library dataclass of its entry point (unknown keys and wrong types fail here, not on a cluster)."""

from __future__ import annotations

import importlib
import itertools
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from experiments._hydra import ConfigError, _leaves_missing, to_dataclass

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
ENTRY_POINTS = sorted(p.stem for p in (ROOT / "experiments").glob("*.py") if not p.name.startswith("_"))


def _entry(name):
    module = importlib.import_module(f"experiments.{name}")
    assert hasattr(module, "CONFIG_NAME") and hasattr(module, "to_config"), (
        f"experiments/{name}.py must define CONFIG_NAME and to_config(cfg)"
    )
    return module


def _groups_of(root: str) -> list[str]:
    raw = OmegaConf.load(CONF / f"{root}.yaml")
    groups = []
    for item in raw.get("defaults", []):
        if isinstance(item, str) or item is None:
            continue
        for key in item:
            key = str(key).split("@")[0].removeprefix("override ")
            if (CONF / key).is_dir():
                groups.append(key)
    return groups


def _options(group: str) -> list[str]:
    """The group's YAML options and the schemas registered as options (experiments._schemas: sandbox=auto is
    SandboxConfig itself), ``*_schema`` nodes (a group's base, not an option) left out."""
    stored = [n.removesuffix(".yaml") for n in _stored(group)]
    names = {p.stem for p in (CONF / group).glob("*.yaml")} | {n for n in stored if not n.endswith("schema")}
    return sorted(names)


def _stored(group: str) -> list[str]:
    from hydra.core.config_store import ConfigStore

    try:
        return [n for n in ConfigStore.instance().list(group) if n.endswith(".yaml")]
    except OSError:  # no schema registered in this group
        return []


def _compose(root, overrides=(), hydra_cfg=False):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=root, overrides=list(overrides), return_hydra_config=hydra_cfg)


def _fill(module, cfg, group=None, option=None):
    # Mandatory values (???) are user inputs; give them a placeholder so the schema can be checked. An
    # option's ??? merged onto its schema's default is not in the composed config: read from its file.
    required = [k for k in _missing_keys(cfg)]
    path = CONF / str(group) / f"{option}.yaml"
    if path.is_file():
        required += _leaves_missing(yaml.safe_load(path.read_text()) or {}, group.replace("/", ".") + ".")
    for key in required:
        OmegaConf.update(cfg, key, "<required>", force_add=True)
    return module.to_config(cfg)


def _missing_keys(cfg, prefix=""):
    for key in cfg:
        path = f"{prefix}{key}"
        if OmegaConf.is_missing(cfg, key):
            yield path
        elif OmegaConf.is_dict(cfg[key]):
            yield from _missing_keys(cfg[key], path + ".")


CASES = [
    (entry, group, option)
    for entry in ENTRY_POINTS
    for group in _groups_of(_entry(entry).CONFIG_NAME)
    for option in _options(group)
]


def test_there_is_a_main_job():
    assert "evaluate" in ENTRY_POINTS


@pytest.mark.parametrize(("entry", "group", "option"), CASES)
def test_every_group_option_composes(entry, group, option):
    module = _entry(entry)
    cfg = _compose(module.CONFIG_NAME, [f"{group}={option}"])
    assert _fill(module, cfg, group, option) is not None


@pytest.mark.parametrize("sweep", sorted(p.stem for p in (CONF / "sweep").glob("*.yaml")))
@pytest.mark.slow  # ~35 s on 2 loaded cores (tests/_tiers.py)
def test_every_sweep_preset_composes(sweep):
    text = (CONF / "sweep" / f"{sweep}.yaml").read_text()
    root = next(
        (line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# root:")), "config"
    )
    module = next((_entry(e) for e in ENTRY_POINTS if _entry(e).CONFIG_NAME == root), None)
    if module is None:  # a preset written ahead of its entry point (it composes once that lands)
        pytest.skip(f"sweep {sweep} is for root config {root!r}, whose entry point is not in this checkout")
    cfg = _compose(root, [f"+sweep={sweep}"], hydra_cfg=True)
    params = cfg.hydra.sweeper.params
    assert params, f"sweep {sweep} sets no hydra.sweeper.params"
    axes = [[f"{k}={v.strip()}" for v in str(vals).split(",")] for k, vals in params.items()]
    for combo in itertools.product(*axes):
        assert _fill(module, _compose(root, list(combo))) is not None, combo


def test_wrong_config_gets_a_clear_error():
    from kernels_env.rules.config import BatchConfig

    with pytest.raises(ConfigError, match="BatchConfig"):
        to_dataclass(BatchConfig, {"no_such_key": 1})
    with pytest.raises(ConfigError, match="resume"):
        to_dataclass(BatchConfig, {"resume": "not-a-bool"})


def test_the_toy_model_config_is_the_demos():
    """conf/model/toy.yaml (Hydra runs) and research.rl.pipeline.toy_model() (the GPU demo) are one model."""
    from research.rl.pipeline.config import toy_model

    cfg = _fill(_entry("train"), _compose("train", ["model=toy"]))
    assert cfg.model == toy_model()


def test_packing_is_one_switch_of_the_pipeline():
    """``packing=true`` (research.rl.pipeline: every learner stage packs, docs/rl.md "Learner at size");
    default off; a value that is not a bool is a config error naming it."""
    train = _entry("train")
    assert _fill(train, _compose("train", ["model=toy"])).packing is False
    assert _fill(train, _compose("train", ["model=toy", "packing=true"])).packing is True
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="packing"):
        _fill(train, _compose("train", ["model=toy", "packing=sometimes"]))
