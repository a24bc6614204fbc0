"""The model shapes the GPU benchmarks measure (``--model``), read from ``conf/model/NAME.yaml``: the file
``python -m experiments.train model=NAME`` composes, so a benchmark measures the shape a run trains. Read with
PyYAML, not Hydra (the GPU image has no Hydra); the YAML holds only what differs from ``models.ModelConfig``'s
defaults, so the dataclass fills the rest exactly as the Hydra schema does (``tests/test_benchmark_shapes.py``
checks both give the same config)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"
# short names on the command line -> conf/model/ files (random weights, the published Qwen2.5 shapes)
SHAPES = {
    "0.5b": "qwen2_0_5b_random",
    "1.5b": "qwen2_5_1_5b",
    "3b": "qwen2_5_3b",
    "7b": "qwen2_5_7b",
    "32b": "qwen2_5_32b",
}


def model_shape(name: str, **runtime):
    """``models.ModelConfig`` of ``name`` (a key of SHAPES or a conf/model file name) with the file's arch and
    runtime fields; ``runtime`` (param_dtype, compute_dtype, attention_impl, remat, ...) overrides them."""
    import yaml

    import models

    stem = SHAPES.get(name, name)
    path = CONF_MODEL / f"{stem}.yaml"
    if not path.is_file():
        raise SystemExit(f"error: unknown model shape {name!r} (choose from {', '.join(SHAPES)})")
    doc = yaml.safe_load(path.read_text()) or {}
    arch = {k: tuple(v) if isinstance(v, list) else v for k, v in (doc.get("arch") or {}).items()}
    names = ("param_dtype", "compute_dtype", "attention_impl", "remat")
    spec_runtime = {k: doc[k] for k in names if k in doc}
    cfg = models.ModelConfig(**arch)
    return dataclasses.replace(cfg, **{**spec_runtime, **runtime})


RUNTIME_FIELDS = ("param_dtype", "compute_dtype", "attention_impl", "remat")


def shape_arch(name: str):
    """``name``'s architecture with ``models.ModelConfig``'s default runtime fields: a benchmark sets its own
    dtypes, attention and remat per attempt, so ``shape_arch("0.5b")`` is ``models.qwen2_0_5b_config()``."""
    import models

    fields = {f.name: f.default for f in dataclasses.fields(models.ModelConfig)}
    return model_shape(name, **{k: fields[k] for k in RUNTIME_FIELDS})


def tiny_arch():
    """The CPU smoke model of the model benchmarks (2 layers of width 64, a 512-token vocabulary)."""
    import models

    tiny = dict(num_layers=2, hidden_size=64, head_dim=16, intermediate_size=128, vocab_size=512)
    return models.tiny_config(**tiny)


def bench_config(model: str, tiny: bool):
    """A benchmark's base config before its per-attempt runtime choices: the tiny smoke model, else the
    ``--model`` shape's architecture (``shape_arch``)."""
    return tiny_arch() if tiny else shape_arch(model)


def add_model_arg(parser) -> None:
    """The benchmarks' ``--model NAME`` option (a key of SHAPES; --tiny / --smoke ignore it)."""
    parser.add_argument(
        "--model",
        choices=list(SHAPES),
        default="0.5b",
        help="model shape from conf/model (default 0.5b; --tiny/--smoke ignore it)",
    )
