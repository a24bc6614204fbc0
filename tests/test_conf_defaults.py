"""Each default has one home, its library dataclass (issue 34): no YAML file in conf/ sets a key to the value
the dataclass it fills already has. The dataclasses are the groups' Hydra schemas (experiments._schemas);
YAML holds presets, sweeps and model shapes, i.e. only values that differ."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
# No dataclass behind them: Hydra's own settings (job logging, run and sweep dirs, the basic launcher alias),
# the evaluation root (groups only) and a sweep's axes.
NO_SCHEMA = ("common/", "hydra/job_logging/", "hydra/launcher/local.yaml", "config.yaml")
NO_SCHEMA += ("sweep/protocols.yaml",)  # hydra.sweeper.params only


def _schemas() -> dict[str, dict[str, type]]:
    """File (conf-relative; a folder: every file in it) -> {key path in the file: the dataclass there}."""
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf

    from kernels_env.client import JudgeConfig, SandboxConfig
    from kernels_env.rules.config import BatchConfig
    from models import ModelSpec
    from research.agent import (
        AgentConfig,
        FlaxPolicyConfig,
        OpenAIPolicyConfig,
        RunConfig,
        ScriptedPolicyConfig,
        TasksConfig,
        ToyPolicyConfig,
    )
    from research.data.config import MixConfig, SplitConfig, SynthesisConfig
    from research.data.transcripts import CorpusConfig
    from research.evaluation import FieldMap, SolutionSetConfig
    from research.evaluation.figures import FiguresConfig
    from research.evaluation.study_eval import StudyConfig
    from research.rl import DistributedConfig, MeshConfig
    from research.rl.pipeline.config import PipelineConfig
    from research.textpolicy import TextPolicySpec
    from research.toyenv import ToyTaskConfig

    return {
        "hydra/launcher/slurm.yaml": {"": SlurmQueueConf},  # the plugin's dataclass
        "sandbox/": {"": SandboxConfig},
        "judge/": {"": JudgeConfig},
        "eval/": {"": BatchConfig},
        "mapping/": {"": FieldMap},
        "tasks/": {"": TasksConfig},
        "agent/": {"": AgentConfig},
        "policy/flax.yaml": {"": FlaxPolicyConfig},
        "policy/openai.yaml": {"": OpenAIPolicyConfig},
        "policy/scripted.yaml": {"": ScriptedPolicyConfig},
        "policy/toy.yaml": {"": ToyPolicyConfig},
        "data/mix/": {"": MixConfig},
        "data/split/": {"": SplitConfig},
        "distributed/": {"": DistributedConfig},
        "mesh/": {"": MeshConfig},
        "model/": {"": ModelSpec},
        "preset/toy_cpu.yaml": {"": PipelineConfig, "tasks": ToyTaskConfig},
        "preset/": {"": PipelineConfig, "tasks": TasksConfig},
        "ablation/": {"": PipelineConfig},
        "env/": {"": PipelineConfig},
        "sweep/ablations.yaml": {"": PipelineConfig},
        "train.yaml": {"": PipelineConfig},
        "agent.yaml": {"": RunConfig},
        "study.yaml": {"": RunConfig, "study": StudyConfig},
        "corpus.yaml": {"corpus": CorpusConfig, "text_policy": TextPolicySpec},
        "synthesize.yaml": {"": SynthesisConfig, "data.mix": MixConfig, "data.split": SplitConfig},
        "solutions.yaml": {"": SolutionSetConfig, "mapping": FieldMap},
        "figures.yaml": {"": FiguresConfig},
    }


def _files() -> list[str]:
    return sorted(str(p.relative_to(CONF)) for p in CONF.rglob("*.yaml"))


def _schema_of(rel: str, schemas: dict[str, dict[str, type]]) -> dict[str, type] | None:
    for key, value in schemas.items():  # a file's own entry comes before its folder's
        if rel == key or (key.endswith("/") and rel.startswith(key)):
            return value
    return None


# A default a factory function computed as None on this machine (e.g. ToyTaskConfig.decontam_dir: the
# KernelBench checkout when one is found): elsewhere it is a value, so a YAML null pins it, never restates it.
COMPUTED_NONE = "<computed None>"


def _defaults(cls: type) -> dict:
    """The dataclass's defaults as plain data (no instance built: no __post_init__ runs)."""
    return _mark_computed(cls, OmegaConf.to_container(OmegaConf.structured(cls), resolve=False))


def _mark_computed(cls: type, data: dict) -> dict:
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        factory = f.default_factory
        if dataclasses.is_dataclass(factory) and isinstance(data[f.name], dict):
            _mark_computed(factory, data[f.name])
        elif callable(factory) and not isinstance(factory, type) and data[f.name] is None:
            data[f.name] = COMPUTED_NONE
    return data


def _same(value, default) -> bool:
    if isinstance(value, bool) != isinstance(default, bool):
        return False
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return len(value) == len(default) and all(_same(a, b) for a, b in zip(value, default, strict=True))
    if isinstance(value, (int, float)) and isinstance(default, (int, float)):
        return value == default  # 16 restates 16.0
    return type(value) is type(default) and value == default


def restated(node: dict, default: dict, prefix: str = "") -> list[str]:
    """Keys of ``node`` whose value equals ``default``'s (a nested dict: compared whole, then key by key).
    ``???`` never restates (an interpolation does when its text is the default's); keys the dataclass
    lacks: tests/test_configs.py fails them."""
    out = []
    for key, value in node.items():
        if not isinstance(default, dict) or key not in default:
            continue
        base, path = default[key], f"{prefix}{key}"
        if value == "???":
            continue
        if isinstance(value, dict) and isinstance(base, dict):
            out += [path] if value == base else restated(value, base, path + ".")
        elif _same(value, base):
            out.append(path)
    return out


def _node_at(node: dict, path: str):
    for part in path.split(".") if path else ():
        node = node.get(part) if isinstance(node, dict) else None
    return node


def offenders(rel: str, text: str, schemas: dict[str, dict[str, type]]) -> list[str]:
    """``rel``'s restated defaults, each as ``file: key = value``."""
    node = yaml.safe_load(text) or {}
    node.pop("defaults", None)
    node.pop("hydra", None)
    entries = _schema_of(rel, schemas)
    out = []
    for where, cls in entries.items():
        sub = _node_at(node, where)
        if not isinstance(sub, dict):
            continue
        # keys a more specific entry checks (a preset's ``tasks``: against its task config)
        inner = [w.removeprefix(f"{where}.") for w in entries if w != where and w.startswith(where)]
        for key in restated(sub, _defaults(cls)):
            if not any(key == w or key.startswith(w + ".") for w in inner):
                out.append(f"{rel}: {where + '.' if where else ''}{key} = {_node_at(sub, key)!r}")
    return out


def test_every_conf_file_has_a_schema_or_none_by_design():
    schemas = _schemas()
    unmapped = [f for f in _files() if _schema_of(f, schemas) is None and not f.startswith(NO_SCHEMA)]
    assert not unmapped, f"conf files with no dataclass named in tests/test_conf_defaults.py: {unmapped}"


def test_no_conf_file_restates_a_dataclass_default():
    schemas = _schemas()
    found = []
    for rel in _files():
        if _schema_of(rel, schemas) is not None and not rel.startswith(NO_SCHEMA):
            found += offenders(rel, (CONF / rel).read_text(), schemas)
    assert not found, (
        "YAML restates dataclass defaults (delete these keys: the dataclass is their home):\n"
        + ("\n".join(found))
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("device: auto\nnum_compile_workers: 3\n", ["device = 'auto'"]),
        (
            "memory_limit_gb: 16\ngpus: null\ncache_dir: ${oc.env:HOME}\n",
            ["memory_limit_gb = 16", "gpus = None"],
        ),
        ("defaults: [auto]\ndevice: cpu\nhydra: {job: {chdir: false}}\n", []),
        ("judge: {timing: {warmup_iters: 3, min_iters: 5}}\n", ["judge.timing.warmup_iters = 3"]),
        (
            "judge: {baselines: [eager, compile, max-autotune]}\n",
            ["judge.baselines = ['eager', 'compile', 'max-autotune']"],
        ),
        (
            "judge: {timing: {warmup_iters: 3, min_iters: 20, max_iters: 200, target_time_s: 0.5,"
            " num_input_sets: 3, l2_flush: true, max_spread: 0.02, stabilize_s: 1.0}}\n",
            [
                "judge.timing = "
                + repr(
                    dict(
                        warmup_iters=3,
                        min_iters=20,
                        max_iters=200,
                        target_time_s=0.5,
                        num_input_sets=3,
                        l2_flush=True,
                        max_spread=0.02,
                        stabilize_s=1.0,
                    )
                )
            ],
        ),
        ("tasks: {limit: 0, source: dir, path: p}\n", ["tasks.limit = 0", "tasks.source = 'dir'"]),
    ],
)
def test_the_check_finds_restated_defaults(text, expected):
    """The check itself: equal values are found (16 for 16.0, null for None, a whole nested node), by their
    path; differing values, interpolations, the defaults list and hydra settings are not; a key another entry
    of the file checks is checked against that entry's dataclass only."""
    from kernels_env.client import JudgeConfig, SandboxConfig
    from research.agent import RunConfig, TasksConfig

    schemas = {"x/": {"": SandboxConfig}, "y/": {"": RunConfig, "tasks": TasksConfig, "judge": JudgeConfig}}
    rel = "y/z.yaml" if text.startswith(("judge", "tasks")) else "x/z.yaml"
    assert sorted(offenders(rel, text, schemas)) == sorted(f"{rel}: {e}" for e in expected)


def test_a_null_pins_a_default_a_factory_computes(monkeypatch):
    """ToyTaskConfig.decontam_dir's factory finds a KernelBench checkout or gives None: preset/toy_cpu.yaml's
    null turns decontamination off on every machine, so it is no restated default, with or without one."""
    from research.toyenv import ToyTaskConfig

    schemas = {"p/": {"tasks": ToyTaskConfig}}
    field = next(f for f in dataclasses.fields(ToyTaskConfig) if f.name == "decontam_dir")
    for found in (None, "/some/kernelbench"):
        monkeypatch.setattr(field, "default_factory", lambda found=found: found)
        assert offenders("p/x.yaml", "tasks: {decontam_dir: null, seed: 0}\n", schemas) == [
            "p/x.yaml: tasks.seed = 0"
        ]
