"""Transformer building blocks (category ``transformer``): RMSNorm and rotary embeddings as ops, and whole
modules (SwiGLU/GELU MLPs, multi-head and grouped-query attention, decoder/encoder layers) as ``block`` ops
that the mix's "modules" bucket draws."""

from __future__ import annotations

from ._core import BYTES, HEADS, SEQ, Ctx, Op, Reject, TensorState
from ._helpers import done

_EXPANSION = {"features": 4}


def _gemm(ctx: Ctx, rows: int, k: int, n: int) -> None:
    ctx.cost("gemm", flops=2.0 * rows * k * n, bytes=BYTES[ctx.dtype] * (rows * k + k * n + rows * n))


def _rows(t: TensorState) -> int:
    return t.numel() // t.shape[-1].real


def _heads(ctx: Ctx, t: TensorState) -> int:
    d = t.shape[-1]
    options = [h for h in (4, 8, 16) if d.real % h == 0 and d.proxy % h == 0 and d.real // h >= 16]
    if not options:
        raise Reject("no head count divides the model width at both sizes")
    return ctx.choice(options)


def _to(ctx: Ctx) -> str:
    return "" if ctx.dtype == "float32" else f".to(torch.{ctx.dtype})"


def _rms_norm_manual(ctx: Ctx, t: TensorState) -> TensorState:
    w = ctx.attr("weight")
    ctx.init(f"{w} = nn.Parameter(torch.ones({ctx.code(t.shape[-1])}{ctx.dk}))")
    ctx.fwd(
        f"variance = {t.var}.float().pow(2).mean(-1, keepdim=True)",
        f"x = ({t.var}.float() * torch.rsqrt(variance + 1e-6)).to({t.var}.dtype) * {w}",
    )
    ctx.mem_cost(t.numel(), t.numel(), t.numel(), flops_per=4, kernels=5)
    return done(ctx, t, "rms_norm_manual", "RMSNorm written out (LLaMA style)", sign="any", bounded=True)


def _rotary(ctx: Ctx, t: TensorState) -> TensorState:
    s, d = t.shape[-2], t.shape[-1]
    if d.real % 2 or d.proxy % 2:
        raise Reject("rotary needs an even head dim")
    cos, sin = ctx.attr("cos"), ctx.attr("sin")
    dc, sc = ctx.code(d), ctx.code(s)
    ctx.init(
        f"inv_freq = 1.0 / (10000.0 ** (torch.arange(0, {dc}, 2).float() / {dc}))",
        f"freqs = torch.outer(torch.arange({sc}).float(), inv_freq)",
        "emb = torch.cat([freqs, freqs], dim=-1)",
        f'self.register_buffer("{cos[5:]}", emb.cos(){_to(ctx)}, persistent=False)',
        f'self.register_buffer("{sin[5:]}", emb.sin(){_to(ctx)}, persistent=False)',
    )
    ctx.fwd(
        f"x1, x2 = {t.var}.chunk(2, dim=-1)",
        f"x = {t.var} * {cos} + torch.cat([-x2, x1], dim=-1) * {sin}",
    )
    ctx.mem_cost(t.numel(), *(t.numel(),) * 4, flops_per=3, kernels=5)
    return done(ctx, t, "rotary_embedding", "rotary position embedding", sign="any")


def _mlp(gated: bool):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        d = t.shape[-1]
        hidden = ctx.dim("hidden_dim", "hidden")
        dc = ctx.code(d)
        if gated:
            w1, w3, w2 = ctx.attr("w1"), ctx.attr("w3"), ctx.attr("w2")
            ctx.init(
                f"{w1} = nn.Linear({dc}, {hidden.expr}, bias=False{ctx.dk})",
                f"{w3} = nn.Linear({dc}, {hidden.expr}, bias=False{ctx.dk})",
                f"{w2} = nn.Linear({hidden.expr}, {dc}, bias=False{ctx.dk})",
            )
            ctx.fwd(f"x = {w2}(F.silu({w1}({t.var})) * {w3}({t.var}))")
            n_in = 2
        else:
            fc1, fc2 = ctx.attr("fc1"), ctx.attr("fc2")
            ctx.init(
                f"{fc1} = nn.Linear({dc}, {hidden.expr}{ctx.dk})",
                f"{fc2} = nn.Linear({hidden.expr}, {dc}{ctx.dk})",
            )
            ctx.fwd(f"x = {fc2}(F.gelu({fc1}({t.var})))")
            n_in = 1
        for _ in range(n_in):
            _gemm(ctx, _rows(t), d.real, hidden.real)
        _gemm(ctx, _rows(t), hidden.real, d.real)
        ctx.mem_cost(_rows(t) * hidden.real, _rows(t) * hidden.real * 2)
        return done(
            ctx,
            t,
            "swiglu_mlp" if gated else "gelu_mlp",
            "a SwiGLU MLP" if gated else "a GELU MLP",
            sign="any",
        )

    return build


def _attention_lines(ctx: Ctx, t: TensorState, kv_heads_ratio: int, causal: bool) -> None:
    d = t.shape[-1]
    dc = ctx.code(d)
    heads = ctx.hyper("num_heads", _heads(ctx, t))
    nh = ctx.attr("num_heads")
    causal_arg = ", is_causal=True" if causal else ""
    ctx.init(f"{nh} = {heads.expr}")
    if kv_heads_ratio == 1:
        qkv, out = ctx.attr("qkv"), ctx.attr("out_proj")
        ctx.init(
            f"{qkv} = nn.Linear({dc}, 3 * {dc}, bias=False{ctx.dk})",
            f"{out} = nn.Linear({dc}, {dc}, bias=False{ctx.dk})",
        )
        ctx.fwd(
            f"b, s, _ = {t.var}.shape",
            f"q, k, v = {qkv}({t.var}).chunk(3, dim=-1)",
            f"q, k, v = (u.view(b, s, {nh}, -1).transpose(1, 2) for u in (q, k, v))",
            f"x = F.scaled_dot_product_attention(q, k, v{causal_arg})",
            f"x = {out}(x.transpose(1, 2).reshape(b, s, -1))",
        )
        _gemm(ctx, _rows(t), d.real, 3 * d.real)
    else:
        kvh = ctx.hyper("num_kv_heads", heads.real // kv_heads_ratio)
        nkv = ctx.attr("num_kv_heads")
        qp, kp, vp, out = ctx.attr("q_proj"), ctx.attr("k_proj"), ctx.attr("v_proj"), ctx.attr("o_proj")
        kv_width = f"{dc} // {heads.expr} * {kvh.expr}"
        ctx.init(
            f"{nkv} = {kvh.expr}",
            f"{qp} = nn.Linear({dc}, {dc}, bias=False{ctx.dk})",
            f"{kp} = nn.Linear({dc}, {kv_width}, bias=False{ctx.dk})",
            f"{vp} = nn.Linear({dc}, {kv_width}, bias=False{ctx.dk})",
            f"{out} = nn.Linear({dc}, {dc}, bias=False{ctx.dk})",
        )
        ctx.fwd(
            f"b, s, _ = {t.var}.shape",
            f"q = {qp}({t.var}).view(b, s, {nh}, -1).transpose(1, 2)",
            f"k = {kp}({t.var}).view(b, s, {nkv}, -1).transpose(1, 2)",
            f"v = {vp}({t.var}).view(b, s, {nkv}, -1).transpose(1, 2)",
            f"k = k.repeat_interleave({nh} // {nkv}, dim=1)",
            f"v = v.repeat_interleave({nh} // {nkv}, dim=1)",
            f"x = F.scaled_dot_product_attention(q, k, v{causal_arg})",
            f"x = {out}(x.transpose(1, 2).reshape(b, s, -1))",
        )
        _gemm(ctx, _rows(t), d.real, d.real + 2 * d.real // kv_heads_ratio)
    _gemm(ctx, _rows(t), d.real, d.real)
    b, s = t.shape[0].real, t.shape[1].real
    ctx.cost("attn", flops=4.0 * b * s * s * d.real, bytes=BYTES[ctx.dtype] * 4 * t.numel(), kernels=6)


def _mha(gqa: bool):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        causal = bool(ctx.rng.random() < 0.5)
        _attention_lines(ctx, t, 2 if gqa else 1, causal)
        name = ("gqa" if gqa else "mha") + ("_causal" if causal else "")
        return done(
            ctx,
            t,
            name,
            ("grouped-query" if gqa else "multi-head") + " self-attention",
            sign="any",
            bounded=True,
        )

    return build


def _decoder_layer(ctx: Ctx, t: TensorState) -> TensorState:
    d = t.shape[-1]
    dc = ctx.code(d)
    n1, n2 = ctx.attr("attn_norm"), ctx.attr("mlp_norm")
    ctx.init(f"{n1} = nn.RMSNorm({dc}, eps=1e-6{ctx.dk})", f"{n2} = nn.RMSNorm({dc}, eps=1e-6{ctx.dk})")
    ctx.fwd(f"residual = {t.var}", f"x = {n1}({t.var})")
    _attention_lines(ctx, t.replace(var="x"), 1, True)
    ctx.fwd("x = residual + x", "residual = x", f"x = {n2}(x)")
    _mlp(True)(ctx, t.replace(var="x"))
    ctx.sig.pop()
    ctx.descs.pop()
    ctx.fwd("x = residual + x")
    ctx.mem_cost(t.numel(), *(t.numel(),) * 8, kernels=6)
    return done(
        ctx,
        t,
        "decoder_layer",
        "a pre-norm decoder layer (RMSNorm, causal attention, SwiGLU MLP)",
        sign="any",
    )


def _encoder_layer(ctx: Ctx, t: TensorState) -> TensorState:
    d = t.shape[-1]
    heads = ctx.hyper("num_heads", _heads(ctx, t))
    ff = ctx.dim("dim_feedforward", "hidden")
    layer = ctx.attr("layer")
    ctx.init(
        f"{layer} = nn.TransformerEncoderLayer({ctx.code(d)}, {heads.expr}, dim_feedforward={ff.expr}, "
        f"dropout=0.0, batch_first=True{ctx.dk})"
    )
    ctx.fwd(f"x = {layer}({t.var})")
    rows = _rows(t)
    for k, n in ((d.real, 3 * d.real), (d.real, d.real), (d.real, ff.real), (ff.real, d.real)):
        _gemm(ctx, rows, k, n)
    b, s = t.shape[0].real, t.shape[1].real
    ctx.cost("attn", flops=4.0 * b * s * s * d.real, bytes=BYTES[ctx.dtype] * 8 * t.numel(), kernels=10)
    return done(ctx, t, "encoder_layer", "nn.TransformerEncoderLayer", sign="any", bounded=True)


def _nn_mha(ctx: Ctx, t: TensorState) -> TensorState:
    d = t.shape[-1]
    heads = ctx.hyper("num_heads", _heads(ctx, t))
    attn = ctx.attr("attn")
    ctx.init(f"{attn} = nn.MultiheadAttention({ctx.code(d)}, {heads.expr}, batch_first=True{ctx.dk})")
    ctx.fwd(f"x, _ = {attn}({t.var}, {t.var}, {t.var}, need_weights=False)")
    _gemm(ctx, _rows(t), d.real, 4 * d.real)
    b, s = t.shape[0].real, t.shape[1].real
    ctx.cost("attn", flops=4.0 * b * s * s * d.real, bytes=BYTES[ctx.dtype] * 4 * t.numel(), kernels=6)
    return done(ctx, t, "nn_multihead_attention", "nn.MultiheadAttention", sign="any", bounded=True)


SEQS = frozenset({SEQ})
OPS = [
    Op("rms_norm_manual", "transformer", frozenset({SEQ, HEADS}), _rms_norm_manual, desc="RMSNorm"),
    Op("rotary_embedding", "transformer", frozenset({SEQ, HEADS}), _rotary, desc="RoPE"),
    Op("swiglu_mlp", "transformer", SEQS, _mlp(True), block=True, desc="SwiGLU MLP"),
    Op("gelu_mlp", "transformer", SEQS, _mlp(False), block=True, desc="GELU MLP"),
    Op("mha", "transformer", SEQS, _mha(False), block=True, desc="MHA"),
    Op("gqa", "transformer", SEQS, _mha(True), block=True, desc="GQA"),
    Op("decoder_layer", "transformer", SEQS, _decoder_layer, block=True, desc="decoder layer"),
    Op("encoder_layer", "transformer", SEQS, _encoder_layer, block=True, desc="encoder layer"),
    Op("nn_multihead_attention", "transformer", SEQS, _nn_mha, block=True, desc="nn.MultiheadAttention"),
]
