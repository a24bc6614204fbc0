"""The comparison and the verdict building never raise, whatever the outputs and reports hold (issue 12: a
comparison whose error overflowed to inf crashed the judge while it formatted the mismatch message).

Property tests (hypothesis) feed ``compare`` / ``max_errors`` / a family's judgement and the client's
assembly (``assemble.verdict``, ``add_timings``, ``add_reward``) odd values: inf / nan / huge / zero-size
tensors of every dtype, complex, quantized, sparse, nested and meta tensors, tensor subclasses, Python
scalars (huge ints, bools, str, bytes, None), nested lists / tuples / dicts, numpy arrays and objects whose
``__eq__`` / ``__repr__`` / ``__float__`` raise. Every mismatch must be a dict whose ``text`` is a str, and
every result must follow the schema and be JSON.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels_env.judge.assemble import result as assemble
from kernels_env.judge.check.compare import compare, max_errors
from kernels_env.judge.run import families
from kernels_env.rules.result import JUDGE_ERROR, JUDGE_STATUSES, STATUSES, validate

TOL = {"float32": [1e-4, 1e-4], "float64": [1e-4, 1e-4], "float16": [1e-2, 1e-2], "bfloat16": [1e-2, 1e-2]}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPECIAL = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 3.0e38, -3.0e38, 1e-45, 1e308, -1e308, 65504]
DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.float8_e4m3fn,
]


class Lazy(torch.Tensor):  # a tensor subclass (the candidate's methods)
    pass


class Hostile:
    """Every dunder a comparison might touch raises (a candidate's object)."""

    def __eq__(self, other):
        raise RuntimeError("eq")

    __ne__ = __eq__

    def __repr__(self):
        raise RuntimeError("repr")

    def __float__(self):
        raise RuntimeError("float")

    __hash__ = object.__hash__


class BadFloat(float):
    def __float__(self):
        raise RuntimeError("float")


class BadList(list):
    def __len__(self):
        raise RuntimeError("len")

    def __iter__(self):
        raise RuntimeError("iter")


ODD_OBJECTS = [
    Hostile,
    lambda: BadFloat(1.0),
    lambda: BadList([1]),
    lambda: np.zeros(3),
    lambda: np.float64(1),
    lambda: np.int64(3),
]


@st.composite
def tensors(draw) -> torch.Tensor:
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 3), min_size=0, max_size=3))
    n = math.prod(shape)
    values = draw(st.lists(st.one_of(st.sampled_from(SPECIAL), st.floats(-1e6, 1e6)), min_size=n, max_size=n))
    base = torch.tensor(values, dtype=torch.float64).reshape(shape)
    if dtype.is_complex:
        return torch.complex(base, base.flip(-1) if base.dim() else base).to(dtype)
    if dtype == torch.bool:
        return base != 0
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return torch.nan_to_num(base, nan=0.0).clamp(info.min, info.max).to(dtype)
    return base.to(dtype)


def odd_tensors(t: torch.Tensor) -> st.SearchStrategy:
    """Variants of ``t`` a candidate could return instead of a plain dense tensor."""
    options = [
        st.just(t),
        st.just(t.to("meta")),
        st.just(t.as_subclass(Lazy)),
        st.just(torch.nn.Parameter(t, requires_grad=False)),
        st.just(t.float() if t.dtype != torch.float32 else t.double()),
        st.just(t.reshape(-1)),
    ]
    if t.dim() == 2 and t.dtype in (torch.float32, torch.float64):
        options.append(st.just(t.to_sparse()))
    if t.dtype == torch.float32 and t.numel():
        finite = torch.nan_to_num(t, nan=0.0, posinf=1.0, neginf=-1.0).clamp(-100, 100)
        options.append(st.just(torch.quantize_per_tensor(finite, 0.5, 0, torch.qint8)))
    if t.dim() >= 1 and t.dtype == torch.float32:
        options.append(st.just(torch.nested.nested_tensor([t.reshape(-1), t.reshape(-1)[:1]])))
    return st.one_of(options)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**400), 10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.complex_numbers(allow_nan=True, allow_infinity=True),
    st.integers(0, 5).map(lambda i: ODD_OBJECTS[i]()),  # built on draw: hypothesis reprs its strategies
)
leaves = st.one_of(scalars, tensors().flatmap(odd_tensors))
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), inner, max_size=3),
    ),
    max_leaves=6,
)


def assert_mismatch_shape(bad) -> None:
    if bad is None:
        return
    assert isinstance(bad, dict) and isinstance(bad["text"], str) and isinstance(bad["where"], str)
    assert isinstance(bad["reason"], str)
    json.dumps(bad, default=str)


@FUZZ
@given(values, values)
def test_compare_never_raises_on_any_pair(expected, got):
    assert_mismatch_shape(compare(expected, got, TOL))
    abs_err, rel_err = max_errors(expected, got)
    assert isinstance(abs_err, float) and isinstance(rel_err, float)


@FUZZ
@given(tensors().flatmap(lambda t: st.tuples(st.just(t), odd_tensors(t) | tensors())))
def test_compare_never_raises_on_tensor_pairs(pair):
    expected, got = pair
    bad = compare(expected, got, TOL)
    assert_mismatch_shape(bad)
    if bad is not None and bad["reason"] == "values":
        # the values' mismatch is the one a finite record is needed for: JSON without NaN/Infinity literals
        json.dumps({k: v for k, v in bad.items() if k != "text"}, allow_nan=False)


@FUZZ
@given(tensors(), st.sampled_from(["large", "denormal", "zeros", "nan_inf"]), values)
def test_a_familys_judgement_never_raises(expected, name, got):
    res = families.judge(name, True, 7, expected, got, TOL)
    assert res["status"] in (families.PASS, families.FAIL) and isinstance(res["reason"], str)


def test_an_overflowing_error_is_reported_not_raised():
    """The red-team finding: |got - expected| of two finite float32 values overflows to inf, and the
    mismatch message formatted the "inf" string with a float format (ValueError: no verdict)."""
    bad = compare(torch.tensor([3.0e38, 1.0]), torch.tensor([-3.0e38, 1.0]), TOL)
    assert bad["reason"] == "values" and bad["max_abs_error"] == "inf"
    assert "max abs error inf" in bad["text"] and "first at index [0]" in bad["text"]


@pytest.mark.parametrize(
    ("expected", "got", "reason"),
    [
        (1, np.array([1, 2]), "values"),  # an array's == is not a bool
        ({"a": torch.ones(2)}, {"a": torch.ones(2)}, None),  # dicts of tensors compare by value
        ({"a": torch.ones(2)}, {"b": torch.ones(2)}, "structure"),
        (1.0, 10**400, "values"),  # no float holds it
        (math.inf, math.inf, None),
        (2, Hostile(), "values"),
        ((torch.ones(2),), BadList([torch.ones(2)]), None),  # its own __len__ / __iter__ are not used
        (torch.ones(2), torch.nn.Parameter(torch.ones(2)).as_subclass(Lazy), "type"),
    ],
)
def test_odd_values_get_the_right_reason(expected, got, reason):
    bad = compare(expected, got, TOL)
    assert (bad and bad["reason"]) == reason


# What a stage's report can hold: it arrives as JSON (NaN and Infinity included: Python's json writes them).
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**400), 10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=5,
)
scalars = json_values  # below: reports, timings and baselines as the client receives them
reports = st.fixed_dictionaries(
    {},
    optional={
        "status": st.one_of(st.sampled_from([*STATUSES, "ok", "bogus"]), scalars),
        "stage": st.one_of(st.sampled_from(["compile", "load", "correctness", "x"]), scalars),
        "error": st.one_of(st.text(max_size=20), scalars),
        "messages": st.one_of(st.lists(st.one_of(st.just({"kind": "note", "text": "t"}), scalars)), scalars),
        "check": scalars,
        "evidence": st.one_of(scalars, st.dictionaries(st.text(max_size=3), scalars, max_size=2)),
        "backends": st.one_of(st.lists(scalars, max_size=2), scalars),
        "correctness": st.one_of(st.none(), st.just({"trials": 1}), scalars),
        "guard_enforced": scalars,
    },
)
timing_values = st.one_of(scalars, st.floats(0, 10), st.sampled_from([0, 0.0, -1.0]))
candidates = st.one_of(
    st.fixed_dictionaries({"median_ms": timing_values, "roofline_floor_ms": timing_values}), scalars
)
bases = st.fixed_dictionaries(
    {
        "comparable": scalars,
        "baselines": st.one_of(
            st.dictionaries(
                st.sampled_from(["eager", "compile", "max-autotune"]),
                st.one_of(st.fixed_dictionaries({"median_ms": timing_values}), scalars),
                max_size=3,
            ),
            scalars,
        ),
    }
)


@FUZZ
@given(reports, candidates, bases, st.sampled_from(["cuda_agent", "binary", "speedup", "log_speedup"]))
def test_verdict_building_never_raises(report, candidate, base, reward):
    settings_ = {"protocol": "kernelbench", "reward": reward}
    names = {"problem": "p", "solution": "s.py"}
    result = assemble.verdict(report, settings_, names, "id1", {"device": "cpu"})
    assemble.add_timings(result, candidate, base)
    assemble.add_reward(result, reward)
    validate(result)
    json.loads(json.dumps(result, default=str))
    assert result["error"] is None or isinstance(result["error"], str)
    assert all(isinstance(m["text"], str) for m in result["messages"])
    assert all(s is None or (isinstance(s, float) and math.isfinite(s)) for s in result["speedups"].values())
    if report.get("status") not in JUDGE_STATUSES:  # what a stage may not report is the judge's failure
        assert result["status"] == JUDGE_ERROR and result["reward"] is None


@pytest.mark.parametrize("status", ["no_solution", "infra_error"])
def test_a_stage_claiming_a_verdict_made_outside_the_judge_is_a_judge_error(status):
    # the judge never gives them: a stage's report that claims one is malformed, as any unknown status
    report = {"status": status, "stage": "correctness", "error": "forged"}
    result = assemble.verdict(report, {"reward": "cuda_agent"}, {"problem": "p"}, "id1", {})
    assemble.add_reward(result, "cuda_agent")
    assert result["status"] == JUDGE_ERROR and result["reward"] is None and status in result["error"]
