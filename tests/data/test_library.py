"""The seed operator library: size, categories; every op builds, renders, runs and keeps its shape rule."""

from __future__ import annotations

import ast

import pytest

from research.data.checks import check_task
from research.data.ops import CATEGORIES, LIBRARY, ops_in

from .conftest import program_with, proxy_payload


def test_library_is_large_and_covers_every_category():
    assert len(LIBRARY) >= 80
    for category in CATEGORIES:
        assert ops_in(category), f"no op in category {category}"
    blocks = {op.name for op in LIBRARY.values() if op.block}
    assert {"swiglu_mlp", "mha", "decoder_layer"} <= blocks
    assert {"rms_norm_manual", "rotary_embedding"} <= {op.name for op in ops_in("transformer")}


def _first_program(name, dtype="float32"):
    for seed in range(40):
        prog = program_with(name, seed, dtype)
        if prog is not None:
            return prog
    return None


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_every_op_runs_and_matches_its_shape_rule(name):
    prog = _first_program(name)
    assert prog is not None, f"{name} never fits its own layouts"
    payload = proxy_payload(prog)
    ast.parse(payload["source"])
    res = check_task(payload)
    # The op must execute and produce exactly the shape its rule declared; value-level filters (a constant
    # or insensitive output for this particular draw) are allowed here, errors and shape mismatches are not.
    assert res["reason"] not in {
        "invalid_source",
        "init_error",
        "eager_error",
        "shape_mismatch",
        "nondeterministic",
    }, f"{name}: {res['reason']}: {res['detail']}\n{payload['source']}"


@pytest.mark.parametrize("name", ["linear", "conv2d", "layer_norm", "sdpa", "swiglu_mlp", "cumsum", "gather"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_ops_run_in_half_precision(name, dtype):
    prog = _first_program(name, dtype)
    assert prog is not None
    payload = proxy_payload(prog)
    assert f"dtype=torch.{dtype}" in payload["source"].split("def get_inputs")[1]
    res = check_task(payload)
    assert res["reason"] not in {"invalid_source", "init_error", "eager_error", "shape_mismatch"}, res
