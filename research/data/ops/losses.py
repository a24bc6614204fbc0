"""Losses against a target input (category ``loss``), unreduced (``reduction="none"``).

Why unreduced: a mean over millions of iid terms barely moves between input draws, so a constant would pass
the judge's tolerance; the sensitivity filter drops such tasks (it did, for most mean-reduced losses).
Per-element and per-sample losses keep the work of the loss kernel without that degeneracy."""

from __future__ import annotations

from ._core import FLOAT_LAYOUTS, ROW, SEQ, VEC, Ctx, Op, TensorState
from ._helpers import done


def _pointwise(name: str, call: str, desc: str, gen: str = "randn", params=None, **op_kw) -> Op:
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        target = ctx.input("target", t.shape, gen=gen)
        kw = {k: ctx.choice(v) for k, v in (params or {}).items()}
        ctx.fwd(f"x = {call.format(x=t.var, target=target, **kw)}")
        ctx.mem_cost(t.numel(), t.numel(), t.numel(), flops_per=4)
        return done(ctx, t, name, desc, sign="any", bounded=False)

    return Op(name, "loss", FLOAT_LAYOUTS, build, desc=desc, **op_kw)


def _cross_entropy(nll: bool):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        n, c = t.shape
        target = ctx.input("target", (n,), dtype="int64", gen=f"randint:{ctx.code(c)}")
        fn = "F.nll_loss" if nll else "F.cross_entropy"
        ctx.fwd(f'x = {fn}({t.var}, {target}, reduction="none")')
        ctx.mem_cost(t.numel(), t.numel(), flops_per=5, kernels=2)
        return done(
            ctx,
            t,
            "nll_loss" if nll else "cross_entropy",
            "per-sample negative log-likelihood" if nll else "per-sample cross-entropy",
            shape=(n,),
            layout=ROW,
            sign="any",
            bounded=False,
        )

    return build


def _kl_div(ctx: Ctx, t: TensorState) -> TensorState:
    target = ctx.input("target", t.shape, gen="probs")
    ctx.fwd(f'x = F.kl_div(torch.log_softmax({t.var}, dim=-1), {target}, reduction="none")')
    ctx.mem_cost(t.numel(), t.numel(), t.numel(), flops_per=8, kernels=3)
    return done(
        ctx, t, "kl_div", "pointwise KL divergence to a target distribution", sign="any", bounded=False
    )


def _triplet(ctx: Ctx, t: TensorState) -> TensorState:
    pos = ctx.input("positive", t.shape)
    neg = ctx.input("negative", t.shape)
    ctx.fwd(f'x = F.triplet_margin_loss({t.var}, {pos}, {neg}, margin=1.0, reduction="none")')
    ctx.mem_cost(t.numel(), *(t.numel(),) * 3, flops_per=6, kernels=4)
    return done(
        ctx,
        t,
        "triplet_margin_loss",
        "per-sample triplet margin loss",
        shape=(t.shape[0],),
        layout=ROW,
        sign="nonneg",
    )


# One build function per op (the op table's unit); what they share is already Ctx's and done()'s.
def _cosine(ctx: Ctx, t: TensorState) -> TensorState:
    y = ctx.input("y", t.shape)
    ctx.fwd(f"x = F.cosine_similarity({t.var}, {y}, dim=1)")
    ctx.mem_cost(t.numel(), t.numel(), t.numel(), flops_per=6, kernels=3)
    return done(
        ctx,
        t,
        "cosine_similarity",
        "cosine similarity with a second input",
        shape=(t.shape[0],),
        layout=ROW,
        sign="any",
        bounded=True,
    )


NONE = ', reduction="none")'
OPS = [
    _pointwise("mse_loss", "F.mse_loss({x}, {target}" + NONE, "squared error"),
    _pointwise("l1_loss", "F.l1_loss({x}, {target}" + NONE, "absolute error"),
    _pointwise(
        "smooth_l1_loss",
        "F.smooth_l1_loss({x}, {target}, beta={b}" + NONE,
        "smooth L1 loss",
        params={"b": [1.0, 0.5]},
    ),
    _pointwise(
        "huber_loss", "F.huber_loss({x}, {target}, delta={d}" + NONE, "Huber loss", params={"d": [1.0, 2.0]}
    ),
    _pointwise(
        "bce_with_logits",
        "F.binary_cross_entropy_with_logits({x}, {target}" + NONE,
        "BCE with logits",
        gen="rand",
    ),
    _pointwise("soft_margin_loss", "F.soft_margin_loss({x}, {target}" + NONE, "soft margin loss", gen="sign"),
    _pointwise(
        "hinge_embedding_loss",
        "F.hinge_embedding_loss({x}, {target}" + NONE,
        "hinge embedding loss",
        gen="sign",
    ),
    _pointwise(
        "poisson_nll_loss",
        "F.poisson_nll_loss({x}, {target}" + NONE,
        "Poisson NLL loss",
        gen="rand",
        needs_bounded=True,
    ),  # exp(input) inside
    Op("cross_entropy", "loss", frozenset({VEC}), _cross_entropy(False), desc="CE"),
    Op("nll_loss", "loss", frozenset({VEC}), _cross_entropy(True), desc="NLL"),
    Op("kl_div", "loss", frozenset({VEC, SEQ}), _kl_div, desc="KL"),
    Op("triplet_margin_loss", "loss", frozenset({VEC}), _triplet, desc="triplet"),
    Op("cosine_similarity", "loss", frozenset({VEC}), _cosine, desc="cosine similarity"),
]
