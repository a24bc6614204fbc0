"""Adversarial input families: inputs beyond a task's own distribution, where the reference is defined.

Each family transforms the task's own inputs (``get_inputs()`` under the trial's seed, in a fresh module) and
is registered in ``kernels_env.judge.check.inputs`` (``make_inputs(problem, seed, family)``); the judge runs
them after the default trials and reports each one separately (``kernels_env.judge.run.families``). Families:

- ``nan_inf``: NaN, +Inf and -Inf planted in every floating input; output NaN/Inf *positions* must match.
- ``denormal``: inputs rescaled into the subnormal range; compared relative to the output's magnitude, so
  flushing to zero (fast-math) or losing them is visible.
- ``large``: inputs scaled by 1e4 (1e2 for float16): overflow-unsafe formulations (naive softmax/exp) and
  half-precision internals fail; compared relative to magnitude.
- ``zeros``: all floating inputs zero.
- ``negative``: uniform [-1, 1) for tasks whose default inputs were all non-negative (``return x`` passes
  ReLU on ``torch.rand`` inputs).
- ``shape``: the batch dimension shrunk (a candidate that hard-coded the task's sizes fails), and
  ``shape_grow``: grown by ``SHAPE_GROWTH`` (a size baked into a kernel leaves the tail of the larger output
  unwritten: poisoned, rejected); the judge's ``shape`` family runs both where its memory plan allows.
- ``noncontig`` (opt-in: KernelBench never passes such views): same values as strided, non-contiguous views.

A family that cannot apply to a task raises ``ValueError`` (reported as skipped, with the reason).
"""

from __future__ import annotations

import math
import os
import types
from collections.abc import Sequence
from typing import Any

import torch

from .inputs import fresh_module, random_inputs, register_family

DEFAULT_FAMILIES = ("nan_inf", "denormal", "large", "zeros", "negative", "shape")
OPTIONAL_FAMILIES = ("noncontig",)
ALL_FAMILIES = (*DEFAULT_FAMILIES, *OPTIONAL_FAMILIES)
RELATIVE_FAMILIES = ("denormal", "large")  # tolerances scale with the output's magnitude
SHAPE_GROW = "shape_grow"
SHAPE_GROWTH = 1.5  # the grown batch, x the task's (the memory plan budgets the family at this size)


def load_problem(path: str | os.PathLike) -> types.ModuleType:
    """A fresh module from a problem file (its constants as the author wrote them)."""
    path = os.path.abspath(os.fspath(path))
    with open(path) as f:
        module = fresh_module(f.read(), path)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if name not in module.__dict__:
            raise ValueError(f"problem {path} has no {name}")
    return module


def _floats(values: Sequence[Any]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel()]


def _batch_size(values: Sequence[Any]) -> int | None:
    dims = [v.shape[0] for v in values if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] > 1]
    return max(set(dims), key=dims.count) if dims else None


def _plant_nan_inf(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    flat = x.reshape(-1).clone()
    n = flat.numel()
    k = max(1, n // 1000)
    if n >= 3:
        # 3k distinct positions over the whole tensor: one in each of 3k strata (n // 3k >= 333 elements),
        # the strata shuffled. Drawn where the tensor lives, in O(k) memory: a permutation of all n cost
        # 2-6x the input on a GPU (int64 indices, keys and sort buffers), cannot run there past 2**31
        # elements, and on a host took ~2.6 s per 2**26 elements (KernelBench L1 #45 has 4.3e9).
        stride = n // (3 * k)
        strata = torch.randperm(3 * k, generator=gen, device=gen.device)
        picks = strata * stride + torch.randint(stride, (3 * k,), generator=gen, device=gen.device)
    else:
        picks = torch.arange(n)
    picks = picks.to(flat.device)
    flat[picks[:k]] = float("nan")
    flat[picks[k : 2 * k]] = float("inf")
    flat[picks[2 * k : 3 * k]] = float("-inf")
    return flat.reshape(x.shape)


def _value_family(name: str, v: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    if name == "nan_inf":
        return _plant_nan_inf(v, gen)
    if name == "denormal":
        peak = float(v.abs().max())
        return v / peak * (torch.finfo(v.dtype).tiny * 0.5) if peak > 0 else v
    if name == "large":
        return v * (1e2 if v.dtype == torch.float16 else 1e4)
    if name == "zeros":
        return torch.zeros_like(v)
    if name == "negative":
        # Drawn in the input's precision (at least float32): a float64 draw doubled the largest inputs' peak.
        work = v.dtype if v.dtype in (torch.float32, torch.float64) else torch.float32
        r = torch.rand(v.shape, generator=gen, dtype=work, device=gen.device).mul_(2).sub_(1)
        return r.to(v.device, v.dtype)
    raise ValueError(f"unknown value family {name!r}")


def _seed_for(seed: int, family: str) -> int:
    return (seed * 1_000_003 + sum(ord(c) * 31**i for i, c in enumerate(family))) % (2**63 - 1)


def _values(name: str):
    def family(problem: Any, seed: int) -> list[Any]:
        values = random_inputs(problem, seed)
        floats = _floats(values)
        if not floats:
            raise ValueError("no floating-point inputs to perturb")
        if name == "negative" and any(bool((v < 0).any()) for v in floats):
            raise ValueError("the task's inputs already include negative values")
        # One generator on the inputs' device: a seed gives the same family on a given device type.
        gen = torch.Generator(device=floats[0].device).manual_seed(_seed_for(seed, name))
        return [
            _value_family(name, v, gen) if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel()
            else v
            for v in values
        ]  # fmt: skip

    return family


for _name in ("nan_inf", "denormal", "large", "zeros", "negative"):
    register_family(_name)(_values(_name))


def _rebatch(problem: Any, seed: int, grow: bool) -> list[Any]:
    values = random_inputs(problem, seed)
    batch = _batch_size(values)
    if batch is None:
        raise ValueError("no batch dimension to change")
    if grow:
        new = min(max(batch + 1, math.ceil(batch * SHAPE_GROWTH)), _int32_batch(values, batch))
        if new <= batch:
            raise ValueError("a larger batch would cross 2**31 elements, which the task's sizes stay below")
    else:
        new = batch // 2 + 1 if batch > 2 else batch + 1
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch:
            reps = math.ceil(new / batch)
            v = v.repeat(reps, *([1] * (v.dim() - 1)))[:new].clone() if new > batch else v[:new].clone()
        out.append(v)
    return out


def _int32_batch(values: Sequence[Any], batch: int) -> int:
    """The largest batch that keeps every batched input below 2**31 elements when the task's own inputs are
    (KernelBench sizes some tasks just below it: 32-bit indexing is then part of the task, not a hack)."""
    limit = 2**31 - 1
    caps = [
        limit // (v.numel() // batch)
        for v in values
        if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch and 0 < v.numel() <= limit
    ]
    return min(caps, default=2**62)


@register_family("shape")
def shape_inputs(problem: Any, seed: int) -> list[Any]:
    return _rebatch(problem, seed, grow=False)


@register_family(SHAPE_GROW)
def grown_shape_inputs(problem: Any, seed: int) -> list[Any]:
    return _rebatch(problem, seed, grow=True)


def _noncontig(v: Any) -> Any:
    if not isinstance(v, torch.Tensor) or v.numel() < 2:
        return v
    if v.dim() >= 2 and v.shape[-1] > 1 and v.shape[-2] > 1:
        return v.transpose(-1, -2).contiguous().transpose(-1, -2)
    wide = torch.empty((*v.shape[:-1], v.shape[-1] * 2), dtype=v.dtype, device=v.device)
    view = wide[..., ::2]
    view.copy_(v)
    return view


@register_family("noncontig")
def noncontig_inputs(problem: Any, seed: int) -> list[Any]:
    values = random_inputs(problem, seed)
    if not any(isinstance(v, torch.Tensor) and v.numel() >= 2 for v in values):
        raise ValueError("no tensor input to lay out differently")
    return [_noncontig(v) for v in values]
