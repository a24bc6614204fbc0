"""The plan language: canonical round trip, defaults, and a clear error for every malformed sequence."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from research.toyenv import PLAN_TOKENS, TOY_OPS, Kernel, Plan, PlanError, Step, format_plan, parse_plan
from research.toyenv.grammar import BLOCKS, ROWS, VECS, WARPS

MAP_OPS = sorted(n for n, o in TOY_OPS.items() if o.kind == "map")
ROW_OPS = sorted(n for n, o in TOY_OPS.items() if o.kind != "map")


def random_plan(rng: np.random.Generator) -> Plan:
    kernels = []
    for _ in range(int(rng.integers(1, 5))):
        steps = [Step(str(rng.choice(MAP_OPS))) for _ in range(int(rng.integers(0, 3)))]
        if rng.random() < 0.5 or not steps:
            steps.append(Step(str(rng.choice(ROW_OPS)), int(rng.integers(0, 2))))
        warps, mask = int(rng.choice(WARPS)), bool(rng.random() < 0.7)
        if any(s.kind != "map" for s in steps):
            kernels.append(Kernel.make(steps, rows=int(rng.choice(ROWS)), warps=warps, mask=mask))
        else:
            kernels.append(
                Kernel.make(
                    steps, block=int(rng.choice(BLOCKS)), vec=int(rng.choice(VECS)), warps=warps, mask=mask
                )
            )
    return Plan(tuple(kernels))


def test_canonical_round_trip_on_random_plans():
    rng = np.random.default_rng(0)
    for _ in range(300):
        plan = random_plan(rng)
        toks = format_plan(plan)
        assert set(toks) <= set(PLAN_TOKENS)
        assert parse_plan(toks) == plan
        assert parse_plan(" ".join(toks)) == plan
        assert format_plan(parse_plan(toks)) == toks


def test_defaults_and_any_setting_order():
    p = parse_plan("K relu scale K softmax")
    assert p.kernels[0] == Kernel((Step("relu"), Step("scale")), 1024, 1, None, 4, True)
    assert p.kernels[1] == Kernel((Step("softmax"),), None, None, 1, 4, True)
    assert p.text() == "K relu scale B1024 V1 W4 M1 K softmax R1 W4 M1"
    assert parse_plan("K relu M0 W8 V4 B256") == parse_plan("K relu B256 V4 W8 M0")
    assert parse_plan("K softmax ax1") == parse_plan("K softmax")
    assert parse_plan("K sum ax0 R2").kernels[0].steps[0] == Step("sum", 0)
    assert parse_plan("K sum ax0").text() == "K sum ax0 R1 W4 M1"


@pytest.mark.parametrize(
    "tokens, fragment, position",
    [
        ("", "empty plan", None),
        ("relu K", "starts with 'K'", 0),
        ("K", "kernel with no ops", 0),
        ("K relu K", "kernel with no ops", 2),
        ("K relu foo", "unknown token 'foo'", 2),
        ("K relu B1000", "B takes one of", 2),
        ("K relu B1024 B512", "repeats B1024", 3),
        ("K B1024 relu", "before any op", 1),
        ("K relu B1024 scale", "after this kernel's settings", 3),
        ("K ax0 relu", "must follow a row or reduce op", 1),
        ("K relu ax0", "which is elementwise", 2),
        ("K softmax ax0 ax1", "second axis", 3),
        ("K softmax B256", "applies to elementwise kernels", 2),
        ("K relu softmax V4", "applies to elementwise kernels", 3),
        ("K relu R2", "applies to row kernels", 2),
        (" ".join(["K relu"] * 9), "at most 8", 16),
        ("K " + " ".join(["relu"] * 13), "at most 12", None),
    ],
)
def test_parser_errors_are_clear(tokens, fragment, position):
    with pytest.raises(PlanError) as info:
        parse_plan(tokens)
    assert fragment in str(info.value)
    assert info.value.position == position


def test_plan_tokens_are_a_fixed_small_vocabulary():
    assert len(PLAN_TOKENS) == len(set(PLAN_TOKENS)) < 80
    for a, b in itertools.combinations(PLAN_TOKENS, 2):
        assert a != b and " " not in a
