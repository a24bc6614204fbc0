"""Composition respects the shape rules: every synthesized task, at its real sizes, produces exactly the
declared inputs and output (checked on the meta device: real shapes, no memory), and its size bookkeeping
(constants, proxies, cost estimate, levels) is consistent."""

from __future__ import annotations

import ast

import pytest
import torch

from research.data.candidates import make_candidate
from research.data.checks import load_module
from research.data.compose import BUCKETS
from research.data.config import SynthesisConfig
from research.data.ops import LIBRARY, Reject


def candidates(n_per_bucket: int, seed: int = 0):
    cfg = SynthesisConfig(seed=seed)
    out = []
    for b in BUCKETS:
        for j in range(n_per_bucket):
            try:
                out.append(make_candidate(cfg, b, j))
            except Reject:
                continue
    return cfg, out


@pytest.fixture(scope="module")
def sample():
    return candidates(25)


def test_real_size_shapes_match_the_declared_ones(sample):
    _, cands = sample
    assert len(cands) > 60
    for c in cands:
        mod = load_module(c.record.source)
        with torch.device("meta"):
            inputs = mod.get_inputs()
            out = mod.Model(*mod.get_init_inputs())(*inputs)
        assert list(out.shape) == c.record.output_shape, c.record.signature
        got = [
            {"name": s["name"], "shape": list(x.shape), "dtype": str(x.dtype)[6:]}
            for s, x in zip(c.record.input_spec, inputs)
        ]
        assert got == c.record.input_spec, c.record.signature


def test_source_constants_and_bookkeeping(sample):
    cfg, cands = sample
    for c in cands:
        r = c.record
        tree = ast.parse(r.source)
        consts = {
            n.targets[0].id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        }
        assert set(r.proxy_sizes) <= set(consts)  # every proxy names a real module-level constant
        assert all(0 < v for v in r.proxy_sizes.values())
        assert r.batch_const in consts
        assert cfg.filters.runtime_min_ms <= r.est_ms <= cfg.filters.runtime_max_ms
        n = len(r.ops)
        assert 1 <= n <= 5 and r.ops[0] in LIBRARY
        assert r.level == (cfg.mix.module_level if r.meta["bucket"] == "m" else cfg.mix.levels[n - 1])
        if r.meta["bucket"] != "m":
            assert n == int(r.meta["bucket"]) and not any(LIBRARY[o].block for o in r.ops)
        else:
            assert LIBRARY[r.ops[0]].block
        assert all(not LIBRARY[o].terminal for o in r.ops[:-1])  # terminal ops only end a chain
        assert r.category == LIBRARY[r.ops[0]].category and set(r.categories) <= {
            LIBRARY[o].category for o in r.ops
        }


def test_value_domain_rules_hold(sample):
    _, cands = sample
    for c in cands:
        ops = c.record.ops
        # nothing that needs positive inputs ever sees the raw (any-sign) input
        assert LIBRARY[ops[0]].needs_sign == "any", ops
