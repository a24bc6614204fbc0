"""Execution checks of one task, run inside a worker process (see ``pool.py``): a task that crashes, hangs or
leaks only costs its worker. Every check runs the task's own source; module-level size constants may be
overridden (proxy or batch-sliced sizes) by rewriting their assignment lines, nothing else changes.

Checks, in order (the first failure names the drop reason):
  exec/format -> init -> eager forward -> declared shape -> finite -> deterministic (two runs under different
  RNG seeds are bitwise equal) -> not constant, not indistinguishable from zeros at the tolerance -> each
  input matters (a fresh draw of that input alone changes the output beyond atol=rtol=tolerance) -> weights
  matter (perturbed parameters change the output) -> torch.compile runs and matches eager.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import re
import time
import traceback
import types
from typing import Any


def apply_overrides(source: str, overrides: dict[str, Any]) -> str:
    """Replace top-level ``NAME = <value>`` assignments; every override must name such an assignment."""
    if not overrides:
        return source
    tree = ast.parse(source)
    lines = source.splitlines()
    found = set()
    for node in reversed(tree.body):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in overrides
        ):
            name = node.targets[0].id
            lines[node.lineno - 1 : node.end_lineno] = [f"{name} = {overrides[name]!r}"]
            found.add(name)
    missing = set(overrides) - found
    if missing:
        raise ValueError(f"size overrides name no module-level assignment: {sorted(missing)}")
    return "\n".join(lines) + "\n"


def load_module(source: str, name: str = "task"):
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise LookupError(f"the source defines no {attr}")
    return module


def _flat(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, list | tuple):
        flat = []
        for o in out:
            flat += _flat(o)
        return flat
    raise TypeError(f"forward returned {type(out).__name__}, not tensors")


def _clone(xs):
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in xs]


def _close(a, b, tol: float) -> bool:
    import torch

    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return False
        if not x.is_floating_point():
            if not torch.equal(x, y):
                return False
        elif not torch.allclose(x.float(), y.float(), atol=tol, rtol=tol, equal_nan=True):
            return False
    return True


def _equal(a, b) -> bool:
    import torch

    return len(a) == len(b) and all(
        x.shape == y.shape
        and (
            torch.equal(x, y)
            if not x.is_floating_point()
            else bool(torch.equal(x.nan_to_num(), y.nan_to_num()))
        )
        for x, y in zip(a, b)
    )


class _Fail(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


def _stage(reason: str, fn, *args):
    try:
        return fn(*args)
    except _Fail:
        raise
    except Exception as exc:  # the task's own error: a drop reason, never a crash of the worker
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        if re.search(r"not implemented for '(BFloat16|Half)'", tb):
            reason = "cpu_dtype_unsupported"  # a CPU kernel gap (CUDA has it): not the task's fault
        raise _Fail(reason, tb[:500]) from None


def check_task(payload: dict) -> dict:
    """Run every check on one task. ``payload``: source, overrides, tolerance, compile_backend,
    also_inductor, expect_shape (list or None), seed."""
    import torch

    torch.set_num_threads(1)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    tol = float(payload.get("tolerance", 1e-2))
    seed = int(payload.get("seed", 0))
    try:
        src = _stage("invalid_source", apply_overrides, payload["source"], payload.get("overrides") or {})
        mod = _stage("invalid_source", load_module, src)

        def build(s):
            torch.manual_seed(s)
            inputs = list(mod.get_inputs())
            return inputs, mod.Model(*mod.get_init_inputs())

        inputs, model = _stage("init_error", build, seed)

        def run(m, xs, s=seed):
            torch.manual_seed(s)
            with torch.no_grad():
                return [o.detach() for o in _flat(m(*_clone(xs)))]

        out = _stage("eager_error", run, model, inputs)
        timings["eager"] = time.perf_counter() - t0
        shape = [list(o.shape) for o in out]
        expect = payload.get("expect_shape")
        if expect is not None and shape[0] != list(expect):
            raise _Fail("shape_mismatch", f"output {shape[0]} != declared {list(expect)}")
        if any(o.is_floating_point() and not bool(torch.isfinite(o).all()) for o in out):
            raise _Fail("nonfinite", "output has NaN or Inf")
        again = _stage("eager_error", run, model, inputs, seed + 1)
        if not _equal(out, again):
            raise _Fail("nondeterministic", "two runs on the same inputs differ")
        o0 = out[0]
        if o0.numel() > 1 and bool((o0 == o0.reshape(-1)[0]).all()):
            raise _Fail("constant_output", "every output element is equal")
        if o0.is_floating_point() and _close([o0], [torch.zeros_like(o0)], tol):
            raise _Fail("constant_output", f"all zeros pass atol=rtol={tol}")

        torch.manual_seed(seed + 1000)
        fresh = list(mod.get_inputs())
        for i, (a, b) in enumerate(zip(inputs, fresh)):
            if isinstance(a, torch.Tensor) and torch.equal(a, b):
                raise _Fail("input_insensitive", f"input {i} is the same on every draw")
            swapped = list(inputs)
            swapped[i] = b
            if _close(out, _stage("eager_error", run, model, swapped), tol):
                raise _Fail("input_insensitive", f"a new draw of input {i} leaves the output within {tol}")
        timings["sensitivity"] = time.perf_counter() - t0

        params = [p for p in model.parameters()]
        if params:
            perturbed = copy.deepcopy(model)
            gen = torch.Generator().manual_seed(seed + 2000)
            with torch.no_grad():
                for p in perturbed.parameters():
                    pf = p.float()
                    scale = max(float(pf.std()) if p.numel() > 1 else 0.0, float(pf.abs().mean()), 0.5)
                    p.add_((torch.randn(p.shape, generator=gen) * scale).to(p.dtype))
            if _close(out, _stage("eager_error", run, perturbed, inputs), tol):
                raise _Fail("weight_insensitive", "perturbed parameters leave the output unchanged")

        backends = []
        if payload.get("compile_backend", "none") != "none":
            backends.append(payload["compile_backend"])
        if payload.get("also_inductor") and "inductor" not in backends:
            backends.append("inductor")
        for backend in backends:
            t1 = time.perf_counter()

            def compiled(b=backend):
                torch._dynamo.reset()
                return run(torch.compile(model, backend=b), inputs)

            out_c = _stage(f"compile_error_{backend}", compiled)
            if not _close(out, out_c, tol):
                raise _Fail(f"compile_mismatch_{backend}", "torch.compile output differs from eager")
            timings[f"compile_{backend}"] = time.perf_counter() - t1
        return {"ok": True, "reason": None, "detail": "", "out_shape": shape[0], "timings": timings}
    except _Fail as f:
        return {"ok": False, "reason": f.reason, "detail": f.detail, "timings": timings}
    finally:
        with contextlib.suppress(Exception):
            torch._dynamo.reset()
