"""Second line behind the dispatch mode: audit the profiler's operator trace for compute it never saw.

The profiler records every dispatcher call through RecordFunction, independently of Python modes. Every call
the dispatch mode handles carries the guard's private marker (``guard::<nonce>``) as a child. So:
- a real ATen kernel call (not a composite that only forwards) without the marker ran while the mode was
  popped or disabled (``_DisableTorchDispatch``, ``_pop_mode``...): ``guard_bypass``;
- ATen calls *inside* a solution-registered custom operator (``TORCH_LIBRARY`` / ``torch.library``, where
  the mode is not re-entered) are judged by the policy as calls from compiled code: ``forbidden_op``;
- if the marker never shows up although the mode handled calls, RecordFunction was switched off.
"""

from __future__ import annotations

import functools

import torch

from ..rules.operators import ALLOWED, META, NEUTRAL_NAMESPACES, TORCH_NAMESPACES, VIEW
from ..rules.policies import Policy
from . import _checks

_DISPATCH_MODE_EVENT = "PythonDispatchMode"


@functools.lru_cache(maxsize=4096)
def _is_forwarding_composite(qualified: str) -> bool:
    """True for CompositeImplicitAutograd ops: they only call other ops (which the trace shows), or nothing
    at all when they are a no-op (``x.to(x.dtype)`` returns ``x`` without dispatching ``_to_copy``).

    The profiler names an op without its overload. When there is no ``default`` overload, every overload
    the dispatcher knows must be a composite; TorchScript-only overloads (``aten::to.prim_dtype``) are not
    dispatcher operators at all and say nothing (counting them made every no-op ``.to()`` a
    ``guard_bypass``)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        return bool(has(qualified, "CompositeImplicitAutograd"))
    except RuntimeError:
        pass
    ns, _, name = qualified.partition("::")
    packet = getattr(getattr(torch.ops, ns, None), name, None)
    known = []
    for ov in packet.overloads() if packet is not None else []:
        try:
            full = qualified if ov == "default" else f"{qualified}.{ov}"
            known.append(has(full, "CompositeImplicitAutograd"))
        except RuntimeError:
            continue  # not a dispatcher operator (TorchScript-only): it never runs under the profiler
    return bool(known) and all(known)


@functools.lru_cache(maxsize=1024)
def python_implemented(qualified: str) -> bool:
    """A custom operator whose kernels were registered from Python (``torch.library``): its internals are
    Python torch calls, not compiled code."""
    try:
        dump = torch._C._dispatch_dump(qualified.split(".")[0])
    except RuntimeError:
        return False
    keys = ("CPU", "CUDA", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
    for line in dump.splitlines():
        key = line.split(":", 1)[0].split("[")[0].strip()
        if key in keys and "registered at" in line and ".py:" in line:
            return True
    return False


def _split(name: str) -> tuple[str, str]:
    ns, sep, rest = name.partition("::")
    return (ns, rest.split(".")[0]) if sep else ("", "")


def trace_violations(
    events,
    marker: str,
    internal_marker: str,
    rules: Policy,
    expected_marks: int,
    constructor_marker: str = "",
) -> list[_checks.Violation]:
    out: list[_checks.Violation] = []
    marks = 0
    cpu = [e for e in events if getattr(getattr(e, "device_type", None), "name", "CPU") == "CPU"]

    def has_marker(e) -> bool:
        for c in e.cpu_children:
            if c.name == marker or (
                c.name == _DISPATCH_MODE_EVENT and any(cc.name == marker for cc in c.cpu_children)
            ):
                return True
        return False

    def subtree_has_marker(e) -> bool:
        return any(c.name == marker or subtree_has_marker(c) for c in e.cpu_children)

    def visit(e, inside_custom: str):
        nonlocal marks
        name = e.name
        if name == internal_marker or (constructor_marker and name == constructor_marker):
            return
        if name == marker:
            marks += 1
            for c in e.cpu_children:
                ns, _ = _split(c.name)
                if ns in TORCH_NAMESPACES:
                    continue  # PyTorch's own implementation of an operator the mode judged
                if ns and ns not in NEUTRAL_NAMESPACES and not c.name.startswith("guard::"):
                    for cc in c.cpu_children:  # implementation of a custom op: compiled code
                        visit(cc, c.name)
                else:
                    visit(c, inside_custom)
            return
        ns, op = _split(name)
        if ns in TORCH_NAMESPACES:
            if has_marker(e):
                for c in e.cpu_children:
                    visit(c, inside_custom)
                return
            if inside_custom:
                origin = "python" if python_implemented(inside_custom) else "compiled"
                decision = rules.decide(ns, op, origin)
                if decision != ALLOWED:
                    out.append(
                        _checks.Violation(
                            _checks.FORBIDDEN_OP,
                            f"{name} called inside custom op "
                            f"{inside_custom} is not allowed under policy '{rules.name}'",
                            {"op": name, "origin": origin, "custom_op": inside_custom},
                        )
                    )
                return
            if subtree_has_marker(e) or _is_forwarding_composite(f"{ns}::{op}"):
                for c in e.cpu_children:
                    visit(c, inside_custom)
                return
            if op in VIEW or op in META:
                return
            out.append(
                _checks.Violation(
                    _checks.GUARD_BYPASS,
                    f"{name} ran inside forward without passing the dispatch guard (mode popped or disabled)",
                    {"op": name},
                )
            )
            return
        if ns and ns not in NEUTRAL_NAMESPACES and ns != "guard" and not name.startswith("guard::"):
            for c in e.cpu_children:
                visit(c, name)
            return
        for c in e.cpu_children:
            visit(c, inside_custom)

    for e in cpu:
        if e.cpu_parent is None:
            visit(e, "")
    if expected_marks and not marks:
        out.append(
            _checks.Violation(
                _checks.GUARD_BYPASS,
                "the profiler recorded none of the guard's "
                f"{expected_marks} marked calls (operator recording switched off?)",
            )
        )
    return out


def unguarded_violations(events, rules: Policy, runtime_marker: str = "") -> list[_checks.Violation]:
    """For calls made with no interception at all (the timing phase): PyTorch compute the policy forbids.

    Origin cannot be told apart here, so policy rules for compiled code apply (lenient for ``cuda_agent``).
    Catches a candidate that detects the guard and computes with PyTorch only when it is not there."""
    out: list[_checks.Violation] = []
    cpu = [e for e in events if getattr(getattr(e, "device_type", None), "name", "CPU") == "CPU"]

    def visit(e, inside_custom: str, runtime: bool = False):
        name = e.name
        if runtime_marker and name == runtime_marker:
            for c in e.cpu_children:
                visit(c, inside_custom, True)
            return
        ns, op = _split(name)
        if ns in TORCH_NAMESPACES:
            if runtime:
                origin = "runtime"
            else:
                origin = "python" if inside_custom and python_implemented(inside_custom) else "compiled"
            if rules.decide(ns, op, origin) == ALLOWED:
                return
            if _is_forwarding_composite(f"{ns}::{op}") and e.cpu_children:
                for c in e.cpu_children:
                    visit(c, inside_custom, runtime)
                return
            if not e.cpu_children and _is_forwarding_composite(f"{ns}::{op}"):
                return
            out.append(
                _checks.Violation(
                    _checks.FORBIDDEN_OP,
                    f"{name} ran in an uninstrumented (timed) call; not allowed under policy '{rules.name}'",
                    {"op": name, "phase": "timing"},
                )
            )
            return
        if ns and ns not in NEUTRAL_NAMESPACES and not name.startswith("guard::"):
            for c in e.cpu_children:
                visit(c, name, runtime)
            return
        for c in e.cpu_children:
            visit(c, inside_custom, runtime)

    for e in cpu:
        if e.cpu_parent is None:
            visit(e, "")
    return out
