"""Gather/scatter/index ops, embeddings and layout ops (category ``indexing``)."""

from __future__ import annotations

from ._core import FLOAT_LAYOUTS, HEADS, IMG2D, SEQ, TOKENS, VEC, Ctx, Dim, Op, Reject, TensorState
from ._helpers import done

ROWS = frozenset({VEC, SEQ})
LASTS = frozenset({VEC, SEQ, HEADS})


def _gather(take_along: bool):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        d = t.shape[-1]
        k = ctx.dim("num_indices", "k")
        if k.real >= d.real or k.proxy >= d.proxy:
            raise Reject("gather would not shrink the axis")
        index = ctx.input("index", (*t.shape[:-1], k), dtype="int64", gen=f"randint:{ctx.code(d)}")
        call = "torch.take_along_dim({x}, {i}, dim=-1)" if take_along else "torch.gather({x}, -1, {i})"
        ctx.fwd(f"x = {call.format(x=t.var, i=index)}")
        n = t.numel() // d.real * k.real
        ctx.mem_cost(n, n, n, n)
        name = "take_along_dim" if take_along else "gather"
        return done(ctx, t, name, "gathering along the last axis", shape=(*t.shape[:-1], k))

    return build


def _index_select(ctx: Ctx, t: TensorState) -> TensorState:
    d = t.shape[1]
    k = ctx.dim("num_indices", "k")
    index = ctx.input("index", (k,), dtype="int64", gen=f"randint:{ctx.code(d)}")
    ctx.fwd(f"x = torch.index_select({t.var}, 1, {index})")
    shape = (t.shape[0], k, *t.shape[2:])
    n = t.numel() // d.real * k.real
    ctx.mem_cost(n, n, n)
    return done(ctx, t, "index_select[1]", "selecting rows by index", shape=shape)


def _embedding(ctx: Ctx, t: TensorState) -> TensorState:
    b, s = t.shape
    vocab = next(c for c in ctx.consts.values() if c.name.startswith("vocab_size"))
    d = ctx.dim("embed_dim", "features")
    emb = ctx.attr("embedding")
    ctx.init(f"{emb} = nn.Embedding({vocab.name}, {d.expr}{ctx.dk})")
    ctx.fwd(f"x = {emb}({t.var})")
    n = b.real * s.real * d.real
    ctx.mem_cost(n, n, n)
    return done(
        ctx,
        t,
        "embedding",
        "an embedding lookup",
        shape=(b, s, d),
        dtype=ctx.dtype,
        layout=SEQ,
        sign="any",
        bounded=True,
    )


def _masked_fill(ctx: Ctx, t: TensorState) -> TensorState:
    mask = ctx.input("mask", t.shape, dtype="bool", gen="mask")
    value = ctx.choice(["0.0", "-1.0"])
    ctx.fwd(f"x = {t.var}.masked_fill({mask}, {value})")
    ctx.mem_cost(t.numel(), t.numel(), t.numel())
    return done(ctx, t, "masked_fill", "masking with a boolean input", sign="any")


def _where(ctx: Ctx, t: TensorState) -> TensorState:
    mask = ctx.input("mask", t.shape, dtype="bool", gen="mask")
    y = ctx.input("y", t.shape)
    ctx.fwd(f"x = torch.where({mask}, {t.var}, {y})")
    ctx.mem_cost(t.numel(), *(t.numel(),) * 4)
    return done(ctx, t, "where", "selecting between two inputs with a mask", sign="any")


def _scatter(ctx: Ctx, t: TensorState) -> TensorState:
    perm = ctx.input("perm", t.shape, dtype="int64", gen="perm")
    ctx.fwd(f"x = torch.zeros_like({t.var}).scatter(-1, {perm}, {t.var})")
    ctx.mem_cost(t.numel(), *(t.numel(),) * 3, kernels=2)
    return done(ctx, t, "scatter_perm", "scattering through a permutation")


def _scatter_amax(ctx: Ctx, t: TensorState) -> TensorState:
    bins = ctx.dim("num_bins", "k")
    index = ctx.input("index", t.shape, dtype="int64", gen=f"randint:{bins.expr}")
    nb = ctx.attr("num_bins")
    ctx.init(f"{nb} = {bins.expr}")
    ctx.fwd(
        f"out = {t.var}.new_zeros(*{t.var}.shape[:-1], {nb})",
        f'x = out.scatter_reduce(-1, {index}, {t.var}, reduce="amax", include_self=False)',
    )
    ctx.mem_cost(t.numel(), *(t.numel(),) * 3, kernels=2)
    return done(ctx, t, "scatter_reduce_amax", "a scatter-max into bins", shape=(*t.shape[:-1], bins))


def _topk(ctx: Ctx, t: TensorState) -> TensorState:
    k = ctx.dim("k", "k")
    if k.real >= t.shape[-1].real or k.proxy >= t.shape[-1].proxy:
        raise Reject("top-k larger than the axis")
    kk = ctx.attr("k")
    ctx.init(f"{kk} = {k.expr}")
    ctx.fwd(f"x = torch.topk({t.var}, {kk}, dim=-1).values")
    ctx.mem_cost(t.numel(), t.numel(), flops_per=8, kernels=2)
    return done(ctx, t, "topk", "the top-k values along the last axis", shape=(*t.shape[:-1], k))


def _sort(ctx: Ctx, t: TensorState) -> TensorState:
    desc = ctx.choice(["", ", descending=True"])
    ctx.fwd(f"x = torch.sort({t.var}, dim=-1{desc}).values")
    ctx.mem_cost(t.numel(), t.numel(), t.numel(), flops_per=12, kernels=2)
    return done(ctx, t, "sort", "sorting along the last axis")


def _flip(ctx: Ctx, t: TensorState) -> TensorState:
    ctx.fwd(f"x = torch.flip({t.var}, dims=[-1])")
    ctx.mem_cost(t.numel(), t.numel(), t.numel())
    return done(ctx, t, "flip", "reversing the last axis", sign=t.sign)


def _roll(ctx: Ctx, t: TensorState) -> TensorState:
    shift = ctx.choice([1, 2, 3])
    ctx.fwd(f"x = torch.roll({t.var}, shifts={shift}, dims=-1)")
    ctx.mem_cost(t.numel(), t.numel(), t.numel())
    return done(ctx, t, "roll", "a circular shift", sign=t.sign)


def _half_slice(ctx: Ctx, t: TensorState) -> TensorState:
    d = t.shape[-1]
    if d.real % 2 or d.proxy % 2:
        raise Reject("odd axis")
    ctx.fwd(f"x = {t.var}[..., : {t.var}.shape[-1] // 2]")
    ctx.mem_cost(t.numel() // 2, t.numel() // 2)
    return done(
        ctx,
        t,
        "slice_half",
        "keeping the first half of the last axis",
        sign=t.sign,
        shape=(*t.shape[:-1], d.derive("{} // 2", lambda v: v // 2)),
    )


def _transpose(ctx: Ctx, t: TensorState) -> TensorState:
    b, s, d = t.shape
    ctx.fwd(f"x = {t.var}.transpose(1, 2)")
    ctx.mem_cost(t.numel(), t.numel())
    return done(ctx, t, "transpose", "swapping the last two axes", shape=(b, d, s), sign=t.sign)


def _pixel_shuffle(unshuffle: bool):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        n, c, h, w = t.shape
        if unshuffle:
            if any(v % 2 for v in (h.real, h.proxy, w.real, w.proxy)):
                raise Reject("odd spatial size")
            ctx.fwd(f"x = F.pixel_unshuffle({t.var}, 2)")
            shape = (
                n,
                c.derive("{} * 4", lambda v: v * 4),
                h.derive("{} // 2", lambda v: v // 2),
                w.derive("{} // 2", lambda v: v // 2),
            )
        else:
            if c.real % 4 or c.proxy % 4:
                raise Reject("channels not divisible by 4")
            ctx.fwd(f"x = F.pixel_shuffle({t.var}, 2)")
            shape = (
                n,
                c.derive("{} // 4", lambda v: v // 4),
                h.derive("{} * 2", lambda v: v * 2),
                w.derive("{} * 2", lambda v: v * 2),
            )
        ctx.mem_cost(t.numel(), t.numel())
        name = "pixel_unshuffle" if unshuffle else "pixel_shuffle"
        return done(ctx, t, name, name.replace("_", " "), shape=shape, sign=t.sign)

    return build


def _concat(ctx: Ctx, t: TensorState) -> TensorState:
    d = t.shape[-1]
    if not d.named:
        raise Reject("concat needs a named axis")
    k = ctx.dim("extra_features", "features")
    y = ctx.input("y", (*t.shape[:-1], k))
    ctx.fwd(f"x = torch.cat([{t.var}, {y}], dim=-1)")
    out = Dim(f"{d.expr} + {k.expr}", d.real + k.real, d.proxy + k.proxy, 1)
    n = t.numel() // d.real * out.real
    ctx.mem_cost(n, n, n)
    return done(ctx, t, "concat", "concatenating a second input", shape=(*t.shape[:-1], out))


def _glu(ctx: Ctx, t: TensorState) -> TensorState:
    d = t.shape[-1]
    if d.real % 2 or d.proxy % 2:
        raise Reject("odd axis")
    ctx.fwd(f"x = F.glu({t.var}, dim=-1)")
    ctx.mem_cost(t.numel(), t.numel(), t.numel() // 2, flops_per=4)
    return done(ctx, t, "glu", "a GLU", shape=(*t.shape[:-1], d.derive("{} // 2", lambda v: v // 2)))


OPS = [
    Op("gather", "indexing", LASTS, _gather(False), desc="gather"),
    Op("take_along_dim", "indexing", LASTS, _gather(True), desc="take_along_dim"),
    Op("index_select", "indexing", frozenset({VEC, SEQ}), _index_select, desc="index_select"),
    Op(
        "embedding",
        "indexing",
        frozenset({TOKENS}),
        _embedding,
        dtypes=frozenset({"int64"}),
        first_only=True,
        desc="Embedding",
        input_name="tokens",
    ),
    Op("masked_fill", "indexing", FLOAT_LAYOUTS, _masked_fill, desc="masked_fill"),
    Op("where", "indexing", FLOAT_LAYOUTS, _where, desc="where"),
    Op("scatter_perm", "indexing", LASTS, _scatter, desc="scatter"),
    Op("scatter_reduce_amax", "indexing", LASTS, _scatter_amax, desc="scatter_reduce"),
    Op("topk", "indexing", LASTS, _topk, desc="topk"),
    Op("sort", "indexing", LASTS, _sort, desc="sort"),
    Op("flip", "indexing", FLOAT_LAYOUTS, _flip, desc="flip"),
    Op("roll", "indexing", FLOAT_LAYOUTS, _roll, desc="roll"),
    Op("slice_half", "indexing", LASTS, _half_slice, desc="slice"),
    Op("transpose", "indexing", frozenset({SEQ}), _transpose, desc="transpose"),
    Op("pixel_shuffle", "indexing", frozenset({IMG2D}), _pixel_shuffle(False), desc="pixel_shuffle"),
    Op("pixel_unshuffle", "indexing", frozenset({IMG2D}), _pixel_shuffle(True), desc="pixel_unshuffle"),
    Op("concat", "indexing", LASTS, _concat, desc="cat"),
    Op("glu", "elementwise", LASTS, _glu, desc="GLU"),
]
