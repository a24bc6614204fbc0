"""The profiler-trace audit behind the dispatch mode (synthetic traces: the rules, one by one)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kernels_env.guard import _checks
from kernels_env.guard._trace import python_implemented, trace_violations, unguarded_violations
from kernels_env.rules.policies import get_policy

M = "guard::seen"
STRICT, CUDA_AGENT, KB = get_policy("strict"), get_policy("cuda_agent"), get_policy("kernelbench")


def ev(name, *children):
    e = SimpleNamespace(
        name=name, cpu_children=list(children), cpu_parent=None, device_type=SimpleNamespace(name="CPU")
    )
    for c in children:
        c.cpu_parent = e
    return e


def flat(*roots):
    out = []

    def walk(e):
        out.append(e)
        for c in e.cpu_children:
            walk(c)

    for r in roots:
        walk(r)
    return out


def checks(roots, rules=STRICT, marks=0):
    return [
        v.check for v in trace_violations(flat(*roots), M, "guard::internal", rules, marks, "guard::ctor")
    ]


def seen(op, *internals):
    return ev(op, ev("PythonDispatchMode", ev(M, ev(op, *internals))))


def test_marked_calls_and_their_internals_are_trusted():
    assert checks([seen("aten::mm", ev("aten::copy_")), seen("aten::empty")]) == []


def test_unmarked_compute_is_a_bypass():
    assert checks([ev("aten::sigmoid")]) == [_checks.GUARD_BYPASS]
    assert checks([ev("aten::relu", ev("aten::clamp_min"))]) == [_checks.GUARD_BYPASS]


def test_unmarked_views_allocations_and_forwarding_composites_are_fine():
    assert (
        checks(
            [ev("aten::view"), ev("aten::dropout"), ev("aten::linear", seen("aten::t"), seen("aten::addmm"))]
        )
        == []
    )


def test_a_no_op_to_is_a_forwarding_composite_and_a_hidden_copy_is_not():
    """``aten::to`` returns self when nothing changes (no child, no marker): fine. A conversion the dispatch
    mode never saw shows as an unmarked ``_to_copy`` under it: a bypass."""
    assert checks([ev("aten::to")]) == []
    assert checks([ev("aten::to", seen("aten::_to_copy", ev("aten::copy_")))]) == []
    assert checks([ev("aten::to", ev("aten::_to_copy", ev("aten::copy_")))]) == [_checks.GUARD_BYPASS]


def test_constructor_and_internal_scopes_are_skipped():
    assert (
        checks(
            [
                ev("guard::ctor", ev("aten::empty"), ev("aten::copy_")),
                ev("guard::internal", ev("aten::clone")),
            ]
        )
        == []
    )


def test_custom_op_internals_are_judged_as_compiled_code():
    custom = ev(
        "myext::fused",
        ev("PythonDispatchMode", ev(M, ev("myext::fused", ev("aten::relu"), ev("aten::empty")))),
    )
    assert checks([custom]) == [_checks.FORBIDDEN_OP]
    gemm = ev("myext::gemm", ev(M, ev("myext::gemm", ev("aten::mm"))))
    assert checks([gemm], CUDA_AGENT) == []
    assert checks([gemm], STRICT) == [_checks.FORBIDDEN_OP]


def test_missing_markers_mean_recording_was_switched_off():
    assert checks([ev("aten::view")], marks=3) == [_checks.GUARD_BYPASS]


def test_unguarded_timing_calls():
    roots = [
        ev("aten::relu", ev("aten::clamp_min")),
        ev("aten::empty"),
        ev("aten::linear", ev("aten::t"), ev("aten::addmm")),
    ]
    found = [v.evidence["op"] for v in unguarded_violations(flat(*roots), STRICT)]
    assert found == ["aten::relu", "aten::addmm"]
    # kernelbench allows glue in timed calls too (their kernel census still demands the custom work), but
    # not raw-memory adoption
    assert unguarded_violations(flat(*roots), KB) == []
    assert [v.evidence["op"] for v in unguarded_violations(flat(ev("aten::set_")), KB)] == ["aten::set_"]
    runtime = ev("guard::runtime", ev("aten::copy_"), ev("aten::set_"), ev("aten::relu"))
    assert [v.evidence["op"] for v in unguarded_violations(flat(runtime), STRICT, "guard::runtime")] == [
        "aten::relu"
    ]


def test_python_implemented_custom_ops():
    @torch.library.custom_op("trace_test::py_op", mutates_args=())
    def py_op(x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape)

    assert python_implemented("trace_test::py_op")
    assert not python_implemented("aten::relu")
