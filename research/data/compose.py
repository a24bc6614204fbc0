"""Composition of 1-5 library ops into one task with shape inference, and sizing to a target eager runtime.

A candidate is a pure function of ``(seed, bucket, index)``: the same triple always gives the same task, which
is what makes synthesis reproducible and resumable. The batch size is solved last: the program is built at
batch 1 and 2 (cost is affine in the batch), then at the batch that hits a log-uniform target runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .config import MixConfig
from .cost import GpuProfile, estimate_ms, peak_bytes
from .ops import LIBRARY, Op
from .ops._core import HEADS, IMG1D, IMG2D, IMG3D, SEQ, TOKENS, VEC, Ctx, Reject, TensorState

__all__ = ["BUCKETS", "Program", "Sized", "compose", "size_candidate"]

BUCKETS = ("1", "2", "3", "4", "5", "m")  # op counts, and transformer modules
PROXY_BATCH = 4


@dataclass
class Program:
    ctx: Ctx
    ops: list[str]
    out: TensorState
    family: str
    dtype: str
    bucket: str

    @property
    def signature(self) -> str:
        return " > ".join(self.ctx.sig) + f" @{self.family}/{self.dtype}"


def _family(ctx: Ctx, layout: str, name: str, batch: int) -> TensorState:
    """The main input for a starting layout, with fresh named sizes."""
    b = ctx.dim("batch_size", "k", real=batch, proxy=PROXY_BATCH)
    dt, gen = ctx.dtype, "randn"
    if layout == VEC:
        shape = (b, ctx.dim("in_features", "features"))
    elif layout == SEQ:
        shape = (b, ctx.dim("seq_len", "seq"), ctx.dim("d_model", "features", multiple_of=16))
    elif layout == HEADS:
        heads = ctx.hyper("num_heads", ctx.choice([4, 8, 16]))
        shape = (b, heads, ctx.dim("seq_len", "seq"), ctx.dim("head_dim", "head_dim"))
    elif layout == IMG1D:
        shape = (b, ctx.dim("in_channels", "channels"), ctx.dim("length", "spatial1d"))
    elif layout == IMG2D:
        channels = ctx.dim("in_channels", "channels")
        side = ctx.dim("height", "spatial2d")
        shape = (b, channels, side, ctx.dim("width", "spatial2d", real=side.real))
    elif layout == IMG3D:
        shape = (
            b,
            ctx.dim("in_channels", "channels"),
            *(ctx.dim(n, "spatial3d") for n in ("depth", "height", "width")),
        )
    elif layout == TOKENS:
        vocab = ctx.dim("vocab_size", "vocab")
        shape = (b, ctx.dim("seq_len", "seq"))
        dt, gen = "int64", f"randint:{vocab.expr}"
    else:
        raise Reject(f"no input family for layout {layout}")
    var = ctx.input(name, shape, dtype=dt, gen=gen)
    return TensorState(var, shape, dt, layout)


def _weighted(rng: np.random.Generator, weights: dict[str, float], present: set[str]) -> str | None:
    keys = [k for k in weights if k in present and weights[k] > 0]
    if not keys:
        return None
    p = np.array([weights[k] for k in keys], dtype=float)
    return keys[int(rng.choice(len(keys), p=p / p.sum()))]


def _try_op(ctx: Ctx, op: Op, state: TensorState) -> TensorState | None:
    cp = ctx.checkpoint()
    try:
        return op.build(ctx, state)
    except Reject:
        ctx.restore(cp)
        return None


def _pick_next(ctx: Ctx, state: TensorState, mix: MixConfig, last: bool, prev: str, pool: list[Op]) -> tuple:
    for _ in range(16):
        fits = [op for op in pool if op.accepts(state) and (last or not op.terminal) and op.name != prev]
        category = _weighted(ctx.rng, mix.next_category_weights, {op.category for op in fits})
        if category is None:
            break
        options = [op for op in fits if op.category == category]
        op = options[int(ctx.rng.integers(len(options)))]
        out = _try_op(ctx, op, state)
        if out is not None:
            return op, out
    raise Reject(f"no library op fits after {prev} on {state.layout}")


def compose(seed_words: list[int], bucket: str, mix: MixConfig, batch: int) -> Program:
    """Build one program; raises Reject when the sampled structure does not fit (a static drop)."""
    rng = np.random.default_rng(seed_words)
    dtypes = list(mix.dtype_weights)
    p = np.array([mix.dtype_weights[d] for d in dtypes], dtype=float)
    ctx = Ctx(rng=rng, dtype=dtypes[int(rng.choice(len(dtypes), p=p / p.sum()))])
    usable = [op for op in LIBRARY.values() if op.name not in mix.exclude_ops]
    blocks = [op for op in usable if op.block]
    regular = [op for op in usable if not op.block]
    if bucket == "m":
        n_ops = 1 + int(rng.random() < mix.module_extra_op_prob)
        first = blocks[int(rng.integers(len(blocks)))]
    else:
        n_ops = int(bucket)
        # the first op sees fresh inputs (any sign): value-domain ops (log, sqrt) only come later
        heads = [op for op in regular if (n_ops == 1 or not op.terminal) and op.needs_sign == "any"]
        category = _weighted(rng, mix.first_category_weights, {op.category for op in heads})
        options = [op for op in heads if op.category == category]
        first = options[int(rng.integers(len(options)))]
    layouts = sorted(first.layouts - {"row"})
    layout = layouts[int(rng.integers(len(layouts)))]
    state = _family(ctx, layout, first.input_name, batch)
    if first.dtypes != frozenset({"int64"}) and state.dtype not in first.dtypes:
        raise Reject(f"{first.name} does not support {state.dtype}")
    state = first.build(ctx, state)
    ops = [first.name]
    for i in range(1, n_ops):
        if LIBRARY[ops[-1]].terminal:
            raise Reject("chain ended by a terminal op")
        op, state = _pick_next(ctx, state, mix, i == n_ops - 1, ops[-1], regular)
        ops.append(op.name)
    return Program(ctx, ops, state, layout, ctx.dtype, bucket)


def _nice(b: float) -> int:
    if b < 32:
        return max(1, int(round(b)))
    step = 16 if b < 1024 else 128
    return int(round(b / step) * step)


@dataclass
class Sized:
    program: Program
    est_ms: float
    peak_gb: float
    target_ms: float


def size_candidate(
    seed_words: list[int], bucket: str, mix: MixConfig, profile: GpuProfile, window: tuple[float, float]
) -> Sized:
    """Compose at batch 1 and 2, solve the batch for a target runtime, rebuild. Reject if it cannot fit."""
    t_rng = np.random.default_rng([*seed_words, 7919])
    lo, hi = mix.target_ms
    target = float(math.exp(t_rng.uniform(math.log(lo), math.log(hi))))
    e1 = estimate_ms(compose(seed_words, bucket, mix, 1).ctx.costs, profile)
    e2 = estimate_ms(compose(seed_words, bucket, mix, 2).ctx.costs, profile)
    slope = max(e2 - e1, 1e-9)
    batch = min(mix.max_batch, _nice((target - (e1 - slope)) / slope))
    program = compose(seed_words, bucket, mix, max(batch, 1))
    est = estimate_ms(program.ctx.costs, profile)
    peak = peak_bytes(program.ctx.costs) / 2**30
    if peak > mix.max_memory_gb:
        raise Reject(f"memory: ~{peak:.1f} GiB per op exceeds {mix.max_memory_gb} GiB")
    if not window[0] <= est <= window[1]:
        raise Reject(f"runtime_proxy: estimated {est:.2f} ms outside [{window[0]}, {window[1]}] ms")
    return Sized(program, est, peak, target)
