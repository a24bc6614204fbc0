"""Helpers for the research.data tests: build a task around one library op and run the checks in-process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from research.data.compose import PROXY_BATCH, Program, _family
from research.data.ops import LIBRARY, Reject
from research.data.ops._core import TOKENS, Ctx
from research.data.render import render

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def program_with(op_name: str, seed: int, dtype: str = "float32") -> Program | None:
    """A task whose main op is ``op_name`` (after a sigmoid when the op needs positive inputs)."""
    op = LIBRARY[op_name]
    rng = np.random.default_rng([seed, 99])
    ctx = Ctx(rng=rng, dtype=dtype)
    layouts = sorted(op.layouts - {"row"})
    layout = layouts[seed % len(layouts)]
    try:
        state = _family(ctx, layout, op.input_name, batch=PROXY_BATCH + 3)
        ops = []
        if not op.accepts(state) and layout != TOKENS:
            pre = LIBRARY["sigmoid"]
            state = pre.build(ctx, state)
            ops.append("sigmoid")
            if not op.accepts(state):
                return None
        state = op.build(ctx, state)
    except Reject:
        return None
    return Program(ctx, [*ops, op_name], state, layout, dtype, "t")


def proxy_payload(program: Program, **kw) -> dict:
    consts = program.ctx.consts.values()
    return {
        "source": render(program),
        "overrides": {c.name: c.proxy for c in consts if c.proxy != c.real},
        "expect_shape": [d.proxy for d in program.out.shape],
        "tolerance": 1e-2,
        "compile_backend": "none",
        "seed": 0,
        **kw,
    }


@pytest.fixture
def eval_dir() -> Path:
    return FIXTURES / "kernelbench"
