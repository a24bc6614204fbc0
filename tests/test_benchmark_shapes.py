"""benchmarks/_common/shapes.py reads conf/model/*.yaml without Hydra: it must give the config Hydra composes
(the benchmarks measure the shape a run trains), and the published parameter counts."""

import dataclasses

import pytest

from benchmarks._common.shapes import SHAPES, model_shape
from models import qwen2_0_5b_config

# parameters by architecture (embedding counted once when tied), from the published config.json files
PUBLISHED = {"0.5b": 494_032_768, "1.5b": 1_543_714_304, "3b": 3_085_938_688, "7b": 7_615_616_512}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shape_has_the_published_parameter_count(name):
    assert model_shape(name).num_params() == PUBLISHED[name]


def test_half_billion_shape_is_the_benchmarks_model():
    cfg = model_shape("0.5b")
    ref = qwen2_0_5b_config()
    runtime = dict(param_dtype=cfg.param_dtype, compute_dtype=cfg.compute_dtype,
                   attention_impl=cfg.attention_impl, remat=cfg.remat)
    assert cfg == dataclasses.replace(ref, **runtime)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_equals_hydra_composition(name):
    from hydra import compose, initialize_config_dir

    from experiments import train
    from experiments._hydra import CONF

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        hydra_cfg = compose(config_name=train.CONFIG_NAME, overrides=[f"model={SHAPES[name]}"])
    composed = train.to_config(hydra_cfg)
    spec = composed.model
    assert model_shape(name) == dataclasses.replace(spec.arch, **spec.runtime())


def test_runtime_override_and_unknown_name():
    assert model_shape("1.5b", remat="none").remat == "none"
    with pytest.raises(SystemExit, match="unknown model shape"):
        model_shape("13b")
