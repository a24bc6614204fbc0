"""Triton kernel source text, one kernel per op, in the corpus' deliberately plain style: a fixed
``BLOCK = 1024`` for flat and row kernels, fixed 32x32x32 tiles for ``tl.dot``, no autotune, no num_warps,
no vector loads. Every kernel loads in float32 and stores in the output's own dtype; offsets are int64
(real tasks reach 2**31 elements)."""

from __future__ import annotations

BLOCK = 1024
GEMM_TILE = 32

# Elementwise maps of ``x`` (float32); ``{0}``, ``{1}`` are the op's numeric parameters from the reference.
_TANH = "(2.0 * tl.sigmoid(2.0 * {v}) - 1.0)"
_SOFTPLUS = "tl.where({v} > 20.0, {v}, tl.log(1.0 + tl.exp({v})))"
UNARY = {
    "relu": "tl.maximum(x, 0.0)",
    "gelu": "0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))",
    "gelu_tanh": "0.5 * x * (1.0 + "
    + _TANH.format(v="(0.7978845608028654 * (x + 0.044715 * x * x * x))")
    + ")",
    "silu": "x * tl.sigmoid(x)",
    "sigmoid": "tl.sigmoid(x)",
    "tanh": _TANH.format(v="x"),
    "leaky_relu": "tl.where(x >= 0.0, x, x * {0})",
    "elu": "tl.where(x > 0.0, x, {0} * (tl.exp(x) - 1.0))",
    "selu": "1.0507009873554805 * tl.where(x > 0.0, x, 1.6732632423543772 * (tl.exp(x) - 1.0))",
    "celu": "tl.where(x > 0.0, x, {0} * (tl.exp(x / {0}) - 1.0))",
    "softplus": _SOFTPLUS.format(v="x"),
    "softsign": "x / (1.0 + tl.abs(x))",
    "hardswish": "x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0",
    "hardsigmoid": "tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0",
    "hardtanh": "tl.minimum(tl.maximum(x, {0}), {1})",
    "mish": "x * " + _TANH.format(v="(" + _SOFTPLUS.format(v="x") + ")"),
    "relu6": "tl.minimum(tl.maximum(x, 0.0), 6.0)",
    "logsigmoid": "tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))",
    "tanhshrink": "x - " + _TANH.format(v="x"),
    "softshrink": "tl.where(x > {0}, x - {0}, tl.where(x < -{0}, x + {0}, 0.0))",
    "hardshrink": "tl.where((x > {0}) | (x < -{0}), x, 0.0)",
    "abs": "tl.abs(x)",
    "square": "x * x",
    "exp": "tl.exp(x)",
    "log": "tl.log(x)",
    "sqrt": "tl.sqrt(x)",
    "rsqrt": "1.0 / tl.sqrt(x + {0})",
    "log1p": "tl.log(1.0 + x)",
    "sin": "tl.sin(x)",
    "cos": "tl.cos(x)",
    "erf": "tl.erf(x)",
    "clamp": "tl.minimum(tl.maximum(x, {0}), {1})",
    "scale": "x * {0}",
    "cube": "x * x * x",
    "reciprocal": "1.0 / (x + {1})",
    "threshold": "tl.where(x > {0}, x, {1})",
    "swish_beta": "x * tl.sigmoid({0} * x)",
}
BINARY = {
    "add_input": "x + y",
    "mul_input": "x * y",
    "maximum_input": "tl.maximum(x, y)",
    "lerp_input": "x + 0.3 * (y - x)",
}
CHANNEL = {
    "add_bias": "x + p",
    "mul_scale": "x * p",
    "gate": "x * tl.sigmoid(p)",
    "prelu": "tl.where(x >= 0.0, x, p * x)",
}

_HEAD = """@triton.jit
def {name}({args}BLOCK: tl.constexpr):
"""
_FLAT = """    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
"""
_STORE = "    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)\n"


def flat_kernel(name: str, expr: str, kind: str) -> str:
    """``unary``: out = f(x); ``binary``: out = f(x, y) (same shape); ``channel``: out = f(x, p[c]) with the
    channel ``c = (offs // inner) % C`` of a broadcast per-channel parameter."""
    args = {"unary": "x_ptr, out_ptr, n, ", "binary": "x_ptr, y_ptr, out_ptr, n, "}
    args["channel"] = "x_ptr, p_ptr, out_ptr, n, inner, C, "
    body = _FLAT
    if kind == "binary":
        body += "    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n"
    elif kind == "channel":
        body += "    p = tl.load(p_ptr + (offs // inner) % C, mask=mask, other=0.0).to(tl.float32)\n"
    return _HEAD.format(name=name, args=args[kind]) + body + f"    y = {expr}\n" + _STORE


# Row kernels: the tensor seen as (outer, R, inner); one program per (outer, inner) pair walks its R
# elements (stride ``inner``) in chunks of BLOCK.
_ROW_START = """    pid = tl.program_id(0).to(tl.int64)
    base = (pid // inner) * R * inner + pid % inner
    cols = tl.arange(0, BLOCK)
"""
_LOOP = """    for start in range(0, R, BLOCK):
        offs = start + cols
        mask = offs < R
        x = tl.load(x_ptr + base + offs * inner, mask=mask, other={other}).to(tl.float32)
"""
_SUM = "    acc = tl.zeros([BLOCK], dtype=tl.float32)\n" + _LOOP.format(other="0.0")
_MAX = '    acc = tl.full([BLOCK], float("-inf"), tl.float32)\n' + _LOOP.format(other='float("-inf")')
_MIN = '    acc = tl.full([BLOCK], float("inf"), tl.float32)\n' + _LOOP.format(other='float("inf")')
_MEAN = _SUM + "        acc += x\n    mean = tl.sum(acc, axis=0) / R\n"
_SQDEV = (
    _MEAN.replace("acc", "acc0")
    + "    acc = tl.zeros([BLOCK], dtype=tl.float32)\n"
    + _LOOP.format(other="0.0")
    + "        d = tl.where(mask, x - mean, 0.0)\n        acc += d * d\n    ssq = tl.sum(acc, axis=0)\n"
)
_LSE = (
    _MAX
    + "        acc = tl.maximum(acc, x)\n    m = tl.max(acc, axis=0)\n"
    + "    acc = tl.zeros([BLOCK], dtype=tl.float32)\n"
    + _LOOP.format(other='float("-inf")')
    + "        acc += tl.where(mask, tl.exp(x - m), 0.0)\n    s = tl.sum(acc, axis=0)\n"
)
# reductions: (body computing ``r``); the result is stored at out_ptr + pid
REDUCE = {
    "sum": _SUM + "        acc += x\n    r = tl.sum(acc, axis=0)\n",
    "mean": _MEAN + "    r = mean\n",
    "amax": _MAX + "        acc = tl.maximum(acc, x)\n    r = tl.max(acc, axis=0)\n",
    "amin": _MIN + "        acc = tl.minimum(acc, x)\n    r = tl.min(acc, axis=0)\n",
    "var": _SQDEV + "    r = ssq / (R - 1)\n",
    "std": _SQDEV + "    r = tl.sqrt(ssq / (R - 1))\n",
    "l2_norm": _SUM + "        acc += x * x\n    r = tl.sqrt(tl.sum(acc, axis=0))\n",
    "logsumexp": _LSE + "    r = m + tl.log(s)\n",
}
REDUCE["max_values"], REDUCE["min_values"] = REDUCE["amax"], REDUCE["amin"]


def reduce_kernel(name: str, op: str) -> str:
    return (
        _HEAD.format(name=name, args="x_ptr, out_ptr, R, inner, ")
        + _ROW_START
        + REDUCE[op]
        + "    tl.store(out_ptr + pid, r.to(out_ptr.dtype.element_ty))\n"
    )


_WRITE = (
    _LOOP
    + "{expr}"
    + ("        tl.store(out_ptr + base + offs * inner, y.to(out_ptr.dtype.element_ty), mask=mask)\n")
)
# row-wise maps: (statistics pass, the per-element output ``y``); ``w_ptr``/``b_ptr`` are indexed by offs
ROWMAP = {
    "softmax": (_LSE, "        y = tl.exp(x - m) / s\n"),
    "log_softmax": (_LSE, "        y = x - m - tl.log(s)\n"),
    "layer_norm": (
        _SQDEV,
        "        y = (x - mean) / tl.sqrt(ssq / R + eps)\n"
        "        y = y * tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n"
        "        y = y + tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n",
    ),
    "layer_norm_noaffine": (_SQDEV, "        y = (x - mean) / tl.sqrt(ssq / R + eps)\n"),
    "rms_norm": (
        _SUM + "        acc += x * x\n    ms = tl.sum(acc, axis=0) / R\n",
        "        y = x / tl.sqrt(ms + eps) * tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n",
    ),
    "l2_normalize": (
        _SUM + "        acc += x * x\n    nrm = tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), eps)\n",
        "        y = x / nrm\n",
    ),
}


_SOFTMAX = ("softmax", "log_softmax")


def rowmap_kernel(name: str, op: str) -> str:
    stats, expr = ROWMAP[op]
    # softmin (-1) and temperature (1/T) scale every load; masked lanes stay -inf for the max pass
    pre = (
        '        x = tl.where(mask, x * scale, float("-inf"))\n'
        if op in _SOFTMAX
        else "        x = x * scale\n"
    )
    stats = stats.replace(".to(tl.float32)\n", ".to(tl.float32)\n" + pre)
    write = _WRITE.replace(".to(tl.float32)\n", ".to(tl.float32)\n" + pre).format(other="0.0", expr=expr)
    args = "x_ptr, w_ptr, b_ptr, out_ptr, R, inner, scale, eps, "
    return _HEAD.format(name=name, args=args) + _ROW_START + stats + write


def gemm_kernel(name: str) -> str:
    """C[b] = A[b] @ B[b] (+ bias over columns), any strides, fixed 32x32x32 tiles."""
    return f"""@triton.jit
def {name}(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn,
        HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        a_mask = (rm[:, None] < M) & (ks[None, :] < K)
        a = tl.load(a_ptr + pid_b * sab + rm[:, None] * sam + ks[None, :] * sak, mask=a_mask, other=0.0)
        b_mask = (ks[:, None] < K) & (rn[None, :] < N)
        b = tl.load(b_ptr + pid_b * sbb + ks[:, None] * sbk + rn[None, :] * sbn, mask=b_mask, other=0.0)
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + pid_b * scb + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=c_mask)
"""
