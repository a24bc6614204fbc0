"""Every config group's defaults come from its library dataclass (issue 34: one home for each default).

Each dataclass is registered in Hydra's ConfigStore under the name the configs select it by (``sandbox:
auto`` is ``SandboxConfig`` itself); YAML in ``conf/`` holds only what differs (the group's other options,
presets, sweeps, model shapes), each option listing the schema first in its ``defaults``.
``tests/test_conf_defaults.py`` fails on a YAML key that restates a dataclass default.

A node that is a whole dataclass is stored as a structured config (a key it lacks, or a value of the wrong
type, fails when Hydra composes). A node that holds only part of one (the rest come from other groups or
from the entry point, e.g. the ``eval`` node of ``BatchConfig`` without its sandbox and judge) is stored as
that part's default values, typed when ``experiments._hydra.to_dataclass`` fills the dataclass. A ``???`` that
an option puts on a key its schema has a default for (``eval=kernelbench``'s solutions_dir) is still required:
OmegaConf keeps the default, ``experiments._hydra.required_by_choices`` the requirement.

Each entry point calls ``register(CONFIG_NAME)`` before Hydra composes; the dataclasses are imported only for
the roots asked for (``experiments.evaluate`` does not import JAX).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, NamedTuple

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf


class Schema(NamedTuple):
    group: str | None  # None: a root config's schema (train_schema)
    name: str
    cls: str  # module:Class
    package: str | None = None  # where it goes; None: its group
    drop: tuple[str, ...] = ()  # fields another group or the entry point fills (the node is then a part)
    # keys of the entry point's beside the dataclass's (experiments.corpus: text_policy.build)
    extra: tuple[tuple[str, Any], ...] = ()


_RULES, _AGENT = "kernels_env.rules.config", "research.agent"
_DATA, _EVAL = "research.data", "research.evaluation"
SANDBOX = Schema("sandbox", "auto", f"{_RULES}:SandboxConfig")
JUDGE = Schema("judge", "kernelbench", f"{_RULES}:JudgeConfig")
TASKS = [
    Schema("tasks", "examples", f"{_AGENT}:TasksConfig"),
    # the base of conf/tasks/*.yaml; conf/env/agent.yaml's `tasks`
    Schema("tasks", "agent_schema", f"{_AGENT}:TasksConfig"),
    Schema("tasks", "toy_schema", "research.toyenv:ToyTaskConfig"),  # conf/env/toy.yaml's `tasks`
]
# RunConfig's own keys (resume, progress) at the root of experiments.agent and .study; the rest are groups'
RUN = Schema(
    "schema", "run", f"{_AGENT}:RunConfig", "_global_", ("policy", "agent", "tasks", "sandbox", "judge")
)
AGENT_LOOP = [
    SANDBOX,
    JUDGE,
    *TASKS,
    Schema("agent", "eval", f"{_AGENT}:AgentConfig"),
    RUN,
]
ROOTS: dict[str, list[Schema]] = {  # root config (an entry point's CONFIG_NAME) -> the schemas it composes
    "config": [
        SANDBOX,
        JUDGE,
        Schema("eval", "examples", f"{_RULES}:BatchConfig", None, ("out_dir", "sandbox", "judge")),
    ],
    "agent": AGENT_LOOP,
    "study": [*AGENT_LOOP, Schema("schema", "study", f"{_EVAL}.study_eval:StudyConfig", "study")],
    "corpus": [
        SANDBOX,
        JUDGE,
        Schema("schema", "corpus", f"{_DATA}.transcripts:CorpusConfig", "corpus", ("judge",)),
        Schema(
            "schema",
            "text_policy",
            "research.textpolicy:TextPolicySpec",
            "text_policy",
            (),
            (("build", False),),
        ),
    ],
    "synthesize": [
        Schema("data/mix", "paper", f"{_DATA}.config:MixConfig"),
        Schema("data/split", "category_holdout", f"{_DATA}.config:SplitConfig"),
        Schema("schema", "synthesize", f"{_DATA}.config:SynthesisConfig", "_global_", ("mix", "split")),
    ],
    # solutions' input, figures' run_dir: left to the root's ??? (a schema default would hide it in --cfg job)
    "solutions": [
        SANDBOX,
        JUDGE,
        Schema("mapping", "default", f"{_EVAL}:FieldMap"),
        Schema(
            "schema",
            "solutions",
            f"{_EVAL}:SolutionSetConfig",
            "_global_",
            ("input", "fields", "sandbox", "judge"),
        ),
    ],
    "figures": [Schema("schema", "figures", f"{_EVAL}.figures:FiguresConfig", "_global_", ("run_dir",))],
    "train": [
        SANDBOX,
        JUDGE,
        *TASKS,
        Schema("distributed", "single", "research.rl:DistributedConfig"),
        Schema("mesh", "single", "research.rl:MeshConfig"),
        Schema(None, "train_schema", "research.rl.pipeline.config:PipelineConfig"),
    ],
}


def _class(path: str) -> type:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def node(schema: Schema) -> Any:
    """The class itself (a whole dataclass), else the defaults of the fields it keeps, plus ``extra``."""
    cls = _class(schema.cls)
    if not schema.drop and not schema.extra:
        return cls
    unknown = set(schema.drop) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
    defaults = OmegaConf.to_container(OmegaConf.structured(cls), resolve=False)
    return {**{k: v for k, v in defaults.items() if k not in schema.drop}, **dict(schema.extra)}


def register(root: str) -> None:
    """Store the schemas root config ``root`` (an entry point's CONFIG_NAME) composes."""
    store = ConfigStore.instance()
    for schema in ROOTS[root]:
        store.store(group=schema.group, name=schema.name, node=node(schema), package=schema.package)
