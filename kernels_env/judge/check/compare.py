"""Compare a candidate's output with the reference's: type, structure, shape, dtype, device, then values.

Values follow ``torch.allclose`` semantics (``|got - expected| <= atol + rtol * |expected|``, the reference
being ``expected``), NaN-aware: NaN positions must coincide and infinities must match exactly. A mismatch
names the first mismatching index, the two values there, the count, and the max abs/rel error.

Total on any value (tests/sandbox/test_compare_fuzz.py): whatever a candidate returns, ``compare`` returns
None or a dict whose ``text`` is a str, never raises. Python values are compared through ``_equal``, whose
``==`` may run the candidate's own ``__eq__``: what that raises or returns is a mismatch, not a judge crash.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import torch

FLOAT_TOLERANCE_KEYS = ("float32", "float64", "float16", "bfloat16")
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)  # exact types: a subclass of either is the candidate's


def compare(
    expected: Any, got: Any, tolerances: Mapping[str, list[float]], where: str = "output"
) -> dict | None:
    """None when ``got`` matches ``expected``; else a JSON-ready dict describing the first difference."""
    if isinstance(expected, torch.Tensor):
        return _compare_tensor(expected, got, tolerances, where)
    if isinstance(expected, list | tuple):
        return _compare_sequence(expected, got, tolerances, where)
    if isinstance(expected, Mapping):
        return _compare_mapping(expected, got, tolerances, where)
    if isinstance(got, torch.Tensor):
        return _diff(where, "type", f"expected {_kind(expected)}, got a tensor")
    if isinstance(expected, float) and isinstance(got, int | float):
        return _compare_float(expected, got, tolerances, where)
    if not _equal(expected, got):
        return _diff(where, "values", f"expected {_show(expected)}, got {_show(got)}")
    return None


def _compare_sequence(expected, got, tolerances, where: str) -> dict | None:
    if not isinstance(got, list | tuple):
        return _diff(where, "type", f"expected a {type(expected).__name__}, got {_kind(got)}")
    want, items = _items(expected), _items(got)
    if len(items) != len(want):
        return _diff(where, "structure", f"expected {len(want)} outputs, got {len(items)}")
    for i, (e, g) in enumerate(zip(want, items)):
        bad = compare(e, g, tolerances, f"{where}[{i}]")
        if bad:
            return bad
    return None


def _items(value: list | tuple) -> list:
    """The elements by the base class's iterator: a subclass's ``__len__`` / ``__iter__`` could be the
    candidate's code (named tuples and torch's return types are tuples like any other)."""
    return list(list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value))


def _compare_mapping(expected: Mapping, got, tolerances, where: str) -> dict | None:
    if type(got) is not dict:
        return _diff(where, "type", f"expected a dict, got {_kind(got)}")
    # Keys are matched by their repr: a key's __eq__ / __hash__ may be the candidate's code.
    want, have = {_show(k): v for k, v in expected.items()}, {_show(k): v for k, v in got.items()}
    if sorted(want) != sorted(have):
        return _diff(where, "structure", f"keys {sorted(have)} != expected {sorted(want)}")
    for key, e in want.items():
        bad = compare(e, have[key], tolerances, f"{where}[{key}]")
        if bad:
            return bad
    return None


def _compare_float(expected: float, got: int | float, tolerances, where: str) -> dict | None:
    atol, rtol = tolerances.get("float64", [1e-4, 1e-4])
    try:
        value = float(got)
    except OverflowError:  # an int beyond any float: never close to a float
        return _diff(where, "values", f"expected {expected!r}, got an integer too large for a float")
    except Exception:  # noqa: BLE001 - a subclass's __float__ is the candidate's code
        return _diff(where, "values", f"expected {expected!r}, got {_show(got)} (not convertible to float)")
    if math.isnan(expected) or math.isnan(value):
        ok = math.isnan(expected) and math.isnan(value)
    elif math.isinf(expected) or math.isinf(value):
        ok = expected == value  # infinities match exactly (inf - inf would be nan)
    else:
        ok = abs(value - expected) <= atol + rtol * abs(expected)
    return None if ok else _diff(where, "values", f"expected {expected!r}, got {_show(got)}")


def _equal(expected: Any, got: Any) -> bool:
    """``expected == got`` for Python values of one type (or two numbers); what a candidate's ``__eq__``
    raises or returns instead of a bool (an array, a lazy object) counts as different."""
    numbers_ = isinstance(expected, numbers.Number) and isinstance(got, numbers.Number)
    if type(expected) is not type(got) and not numbers_:
        return False
    try:
        same = expected == got
        return same if type(same) is bool else False
    except Exception:  # noqa: BLE001 - the candidate's __eq__ failed: the values are not equal
        return False


def _compare_tensor(expected: torch.Tensor, got: Any, tolerances: Mapping[str, list[float]], where: str):
    if not isinstance(got, torch.Tensor):
        return _diff(where, "type", f"expected a tensor, got {_kind(got)}")
    if type(got) not in PLAIN_TENSORS:  # a subclass's methods (and __torch_function__) are the candidate's
        return _diff(where, "type", f"output must be a plain torch.Tensor, got subclass {type(got).__name__}")
    if got.is_nested or expected.is_nested:  # nested tensors have no single shape to compare
        return _diff(where, "storage", "output is a nested tensor; needs a dense strided tensor")
    for what, show in (("shape", list), ("dtype", _dt)):  # the same report for either mismatch
        have, want = show(getattr(got, what)), show(getattr(expected, what))
        if have != want:
            text = f"{what} {have} != expected {want}"
            return _diff(where, what, text, **{what: have, f"expected_{what}": want})
    if got.device != expected.device:
        return _diff(where, "device", f"device {got.device} != expected {expected.device}")
    if got.layout != torch.strided or got.is_meta or expected.layout != torch.strided or expected.is_meta:
        return _diff(
            where, "storage", f"output has layout {got.layout} / meta={got.is_meta}; needs real storage"
        )
    if expected.numel() == 0:
        return None
    if expected.is_quantized or got.is_quantized:  # no arithmetic on them: compare what they represent
        expected, got = expected.dequantize(), got.dequantize()
    dtype_key = _dt(expected.dtype)
    if expected.is_floating_point() or expected.is_complex():
        atol, rtol = tolerances.get(dtype_key, tolerances.get("float32", [1e-4, 1e-4]))
        return _compare_values(expected, got, float(atol), float(rtol), where, dtype_key)
    return _compare_values(expected, got, 0.0, 0.0, where, dtype_key)


CHUNK = 1 << 24  # elements per step of a scan over an output (no temporaries of the output's size)


def _chunks(t: torch.Tensor):
    flat = t.detach().reshape(-1)
    return (flat[i : i + CHUNK] for i in range(0, flat.numel(), CHUNK))


def _all_close(expected: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> bool:
    """The passing case, in chunks: a correct answer on today's problem sizes costs no output-sized copies
    (a mismatch is then described on the whole tensors below)."""
    if expected.is_complex():
        expected, got = torch.view_as_real(expected.resolve_conj()), torch.view_as_real(got.resolve_conj())
    floating = expected.is_floating_point()
    work = torch.float64 if expected.dtype == torch.float64 else (torch.float32 if floating else torch.int64)
    for e, g in zip(_chunks(expected), _chunks(got)):
        e, g = e.to(work), g.to(work)
        same = torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True) if floating else e == g
        if not bool(same.all()):
            return False
    return True


def _compare_values(expected, got, atol: float, rtol: float, where: str, dtype_key: str) -> dict | None:
    if _all_close(expected, got, atol, rtol):
        return None
    if expected.is_floating_point() or expected.is_complex():
        work = torch.float64 if expected.dtype in (torch.float64, torch.complex128) else torch.float32
        if expected.is_complex():  # compare real and imaginary parts (a trailing dimension of 2)
            expected, got = (
                torch.view_as_real(expected.resolve_conj()),
                torch.view_as_real(got.resolve_conj()),
            )
        e, g = expected.to(work), got.to(work)
        bad = ~torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    else:  # integers and bools compare exactly
        e, g = expected.to(torch.int64), got.to(torch.int64)
        bad = e != g
    num_bad = int(bad.sum().item())
    if num_bad == 0:
        return None
    flat = int(torch.argmax(bad.reshape(-1).to(torch.int8)).item())
    index = _unravel(flat, list(bad.shape))
    e_nan, g_nan = (torch.isnan(e), torch.isnan(g)) if e.is_floating_point() else (None, None)
    details = {
        "num_mismatched": num_bad,
        "numel": bad.numel(),
        "first_index": index,
        "expected": _num(e.reshape(-1)[flat].item()),
        "got": _num(g.reshape(-1)[flat].item()),
        "atol": atol,
        "rtol": rtol,
        "dtype": dtype_key,
    }
    if e_nan is not None:
        finite = torch.isfinite(e) & torch.isfinite(g)
        diff = torch.where(finite, (g - e).abs(), torch.zeros_like(e))
        rel = diff / e.abs().clamp_min(torch.finfo(e.dtype).tiny)
        details.update(
            max_abs_error=_num(diff.max().item()),
            max_rel_error=_num(torch.where(finite, rel, torch.zeros_like(rel)).max().item()),
            nan_positions_differ=int((e_nan ^ g_nan).sum().item()),
            inf_mismatched=int(((torch.isinf(e) | torch.isinf(g)) & bad).sum().item()),
        )
    return _diff(where, "values", _values_text(details), **details)


def _values_text(d: dict[str, Any]) -> str:
    """The mismatch in one line; the errors may be "inf"/"nan" strings (``_num``), so each is formatted by
    ``_g`` (a finite difference of two float32 values can overflow to inf)."""
    text = (
        f"{d['num_mismatched']}/{d['numel']} values differ; first at index {d['first_index']}: "
        f"expected {d['expected']}, got {d['got']}"
    )
    if "max_abs_error" in d:
        text += f"; max abs error {_g(d['max_abs_error'])}, max rel error {_g(d['max_rel_error'])}"
        if d["nan_positions_differ"]:
            text += f"; NaN positions differ at {d['nan_positions_differ']} places"
    return text + f" (atol={d['atol']:g}, rtol={d['rtol']:g})"


def _g(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else str(value)


def max_errors(expected: Any, got: Any) -> tuple[float, float]:
    """Max abs and rel error over all floating outputs (for the record of a correct trial)."""
    if isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor) and expected.is_floating_point():
        if expected.numel() == 0 or not _same_storage_kind(expected, got):
            return 0.0, 0.0  # nothing to measure (called on outputs that matched)
        work = torch.float64 if expected.dtype == torch.float64 else torch.float32
        abs_err = rel_err = 0.0
        for e, g in zip(_chunks(expected), _chunks(got)):
            e, g = e.to(work), g.to(work)
            finite = torch.isfinite(e) & torch.isfinite(g)
            diff = torch.where(finite, (g - e).abs(), torch.zeros_like(e))
            rel = torch.where(finite, diff / e.abs().clamp_min(torch.finfo(work).tiny), torch.zeros_like(e))
            abs_err, rel_err = max(abs_err, float(diff.max())), max(rel_err, float(rel.max()))
        return abs_err, rel_err
    if isinstance(expected, list | tuple) and isinstance(got, list | tuple):
        pairs = [max_errors(e, g) for e, g in zip(_items(expected), _items(got))]
        return (max((p[0] for p in pairs), default=0.0), max((p[1] for p in pairs), default=0.0))
    return 0.0, 0.0


def _same_storage_kind(expected: torch.Tensor, got: torch.Tensor) -> bool:
    """Both dense, on one device, of one shape: element-wise arithmetic between them is defined."""
    if type(got) not in PLAIN_TENSORS or got.is_nested or expected.is_nested:
        return False
    dense = all(t.layout == torch.strided and not t.is_meta and not t.is_quantized for t in (expected, got))
    return dense and got.shape == expected.shape and got.device == expected.device


def _unravel(flat: int, shape: list[int]) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return list(reversed(index))


def _num(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no NaN/Inf: keep them readable
    return v


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _show(value: Any, limit: int = 200) -> str:
    """``repr`` for a message, cut short; a candidate's ``__repr__`` that fails shows the type instead."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - the candidate's __repr__
        text = f"<{_kind(value)}>"
    text = text if isinstance(text, str) else f"<{_kind(value)}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _diff(where: str, reason: str, text: str, **details: Any) -> dict:
    return {"where": where, "reason": reason, "text": f"{where}: {text}", **details}
