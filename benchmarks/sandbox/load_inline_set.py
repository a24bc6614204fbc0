"""Writes a KernelBench-style set of problems and load_inline solutions (ours; for the throughput benchmark).

    python -m benchmarks.sandbox.load_inline_set [--out DIR]  # problems/, solutions/ (default: the cache)

The set is not kept in git: ``set_dir()`` generates it on first use (``_generated``) into a directory named
for its contents.

Each problem is a KernelBench-format module (``Model``, ``get_inputs``, ``get_init_inputs``, level-1 sizes);
each solution is written the way public KernelBench solutions are: one ``cuda_sources`` string holding
``#include <torch/extension.h>``, the kernel and a ``torch::Tensor`` wrapper that launches it on the
default stream (as most public solutions do; no ATen/c10 CUDA headers, so the set also compiles against a
CPU-only torch), ``cpp_sources`` declaring the wrapper, ``functions=[...]``, built at import with
``torch.utils.cpp_extension.load_inline``. Every solution's CUDA differs, so each is a real (cold) build.

Each of the 35 operators comes twice (70 pairs): style 1 (grid-stride loop, 256 threads, 64-bit indices) on
one shape, and style 2 (one thread per element, 512 threads, 32-bit indices, a dtype check; row kernels with
512 threads) on another shape, so that every solution has its own reference and its own cold baselines. 70
candidates, not 35, so that a throughput measured as candidates / wall time is not dominated by the first
wave of builds and the last (with 12-16 builds at once, 35 is under three waves).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.sandbox._generated import materialize


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # "unary", "binary" or "rows" (a reduction or normalisation over the last dimension)
    torch_expr: str  # in terms of x (and y for binary ops)
    cuda_expr: str  # unary/binary: in terms of v (and w); rows: see ROW_KERNELS


UNARY = [
    ("relu", "torch.relu(x)", "fmaxf(v, 0.0f)"),
    ("leaky_relu", "torch.nn.functional.leaky_relu(x, 0.01)", "v > 0.0f ? v : 0.01f * v"),
    ("elu", "torch.nn.functional.elu(x)", "v > 0.0f ? v : expm1f(v)"),
    ("sigmoid", "torch.sigmoid(x)", "1.0f / (1.0f + expf(-v))"),
    ("tanh", "torch.tanh(x)", "tanhf(v)"),
    ("silu", "torch.nn.functional.silu(x)", "v / (1.0f + expf(-v))"),
    ("gelu_tanh", "torch.nn.functional.gelu(x, approximate='tanh')",
     "0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))"),
    ("softplus", "torch.nn.functional.softplus(x)", "v > 20.0f ? v : log1pf(expf(v))"),
    ("mish", "torch.nn.functional.mish(x)", "v * tanhf(v > 20.0f ? v : log1pf(expf(v)))"),
    ("hardtanh", "torch.nn.functional.hardtanh(x)", "fminf(fmaxf(v, -1.0f), 1.0f)"),
    ("hardsigmoid", "torch.nn.functional.hardsigmoid(x)", "fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f)"),
    ("hardswish", "torch.nn.functional.hardswish(x)", "v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f"),
    ("softsign", "torch.nn.functional.softsign(x)", "v / (1.0f + fabsf(v))"),
    ("relu6", "torch.nn.functional.relu6(x)", "fminf(fmaxf(v, 0.0f), 6.0f)"),
    ("square", "x * x", "v * v"),
    ("abs", "torch.abs(x)", "fabsf(v)"),
    ("exp", "torch.exp(x)", "expf(v)"),
    ("log1p_abs", "torch.log1p(torch.abs(x))", "log1pf(fabsf(v))"),
    ("sin", "torch.sin(x)", "sinf(v)"),
    ("clamp_half", "torch.clamp(x, -0.5, 0.5)", "fminf(fmaxf(v, -0.5f), 0.5f)"),
    ("scale_shift", "x * 2.5 + 0.5", "v * 2.5f + 0.5f"),
    ("selu", "torch.selu(x)",
     "1.0507009873554805f * (v > 0.0f ? v : 1.6732632423543772f * expm1f(v))"),
]  # fmt: skip
BINARY = [
    ("add", "x + y", "v + w"),
    ("mul", "x * y", "v * w"),
    ("sub_square", "(x - y) * (x - y)", "(v - w) * (v - w)"),
    ("maximum", "torch.maximum(x, y)", "fmaxf(v, w)"),
    ("fma_self", "x * y + x", "fmaf(v, w, v)"),
    ("relu_add", "torch.relu(x + y)", "fmaxf(v + w, 0.0f)"),
]
ROWS = ["row_sum", "row_max", "row_mean", "row_l2norm", "row_softmax", "row_rmsnorm", "row_logsumexp"]
ROW_TORCH = {
    "row_sum": "torch.sum(x, dim=-1)",
    "row_max": "torch.amax(x, dim=-1)",
    "row_mean": "torch.mean(x, dim=-1)",
    "row_l2norm": "torch.linalg.vector_norm(x, dim=-1)",
    "row_softmax": "torch.softmax(x, dim=-1)",
    "row_rmsnorm": "x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6)",
    "row_logsumexp": "torch.logsumexp(x, dim=-1)",
}
OPS = [Op(n, "unary", t, c) for n, t, c in UNARY] + [Op(n, "binary", t, c) for n, t, c in BINARY]
OPS += [Op(n, "rows", ROW_TORCH[n], "") for n in ROWS]
STYLES = (1, 2)  # each operator twice: two kernel styles, two problem shapes

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """{title} (KernelBench level-1 style)."""

    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {expr}


batch_size = {rows}
dim = {cols}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

SOLUTION = '''"""{title}: a custom CUDA kernel built with load_inline (KernelBench style).

Generated by benchmarks.sandbox.load_inline_set.
"""

# ruff: noqa: E501, F401  (generated: C++ lines, and the torch import KernelBench solutions carry)

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
{kernel}
"""

cpp_source = "{decl};"

{module} = load_inline(
    name="{ext}",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["{fn}"],
    verbose=False,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {module}.{fn}({args})
'''

ELEMENTWISE = """
__global__ void {name}_kernel({params}, float* __restrict__ out, int64_t n) {{
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
    {loads}
    out[i] = {expr};
  }}
}}

torch::Tensor {name}_forward({tensors}) {{
  {checks}
  auto out = torch::empty_like(x);
  int64_t n = x.numel();
  int threads = 256;
  int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 4096);
  if (n > 0) {{
    {name}_kernel<<<(unsigned)blocks, threads>>>({ptrs}, out.data_ptr<float>(), n);
  }}
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err));
  return out;
}}"""

# Style 2: one thread per element (no grid-stride loop), 512 threads, 32-bit indices, a dtype check: the
# other shape public KernelBench solutions take. A distinct build from style 1 for the same operator.
ELEMENTWISE_2 = """
__global__ void {name}_v2_kernel({params}, float* __restrict__ out, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {{
    {loads}
    out[i] = {expr};
  }}
}}

torch::Tensor {name}_v2_forward({tensors}) {{
  {checks}
  auto out = torch::empty_like(x);
  const int n = static_cast<int>(x.numel());
  const int threads = 512;
  const int blocks = (n + threads - 1) / threads;
  if (n > 0) {{
    {name}_v2_kernel<<<blocks, threads>>>({ptrs}, out.data_ptr<float>(), n);
  }}
  return out;
}}"""

# rows: one block per row; (init, accumulate, combine op, finish) of the block reduction, or a normalisation.
ROW_REDUCE = {
    "row_sum": ("0.0f", "acc += v;", "SumOp", "acc"),
    "row_max": ("-INFINITY", "acc = fmaxf(acc, v);", "MaxOp", "acc"),
    "row_mean": ("0.0f", "acc += v;", "SumOp", "acc / (float)cols"),
    "row_l2norm": ("0.0f", "acc += v * v;", "SumOp", "sqrtf(acc)"),
}
# The combine steps are functor structs, not ``[] __device__`` lambdas: those need nvcc's --extended-lambda,
# which load_inline does not pass (and KernelBench solutions are built without).
ROW_COMMON = """
struct SumOp {
  __device__ static float identity() { return 0.0f; }
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ static float identity() { return -INFINITY; }
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Block-wide reduction (blockDim.x a multiple of 32, at most 1024): shuffles within each warp, then warp 0
// over the per-warp partials, its lanes past the last warp holding the identity. All threads get the result.
template <typename Op>
__device__ float block_reduce(float value, Op op) {
  __shared__ float partial[32];
  __shared__ float result;
  for (int offset = 16; offset > 0; offset >>= 1)
    value = op(value, __shfl_down_sync(0xffffffff, value, offset));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    int warps = (blockDim.x + 31) >> 5;
    value = lane < warps ? partial[lane] : Op::identity();
    for (int offset = 16; offset > 0; offset >>= 1)
      value = op(value, __shfl_down_sync(0xffffffff, value, offset));
    if (lane == 0) result = value;
  }
  __syncthreads();
  return result;
}
"""
ROW_REDUCE_KERNEL = """
__global__ void {name}_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {{
  const float* row = x + (int64_t)blockIdx.x * cols;
  float acc = {init};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {{ float v = row[c]; {acc} }}
  acc = block_reduce(acc, {combine}());
  if (threadIdx.x == 0) out[blockIdx.x] = {finish};
}}
"""
ROW_NORMALISE_KERNEL = {
    "row_softmax": """
__global__ void {name}_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {{
  const float* row = x + (int64_t)blockIdx.x * cols;
  float* dst = out + (int64_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_reduce(m, MaxOp());
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
  s = block_reduce(s, SumOp());
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = expf(row[c] - m) / s;
}}
""",
    "row_rmsnorm": """
__global__ void {name}_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {{
  const float* row = x + (int64_t)blockIdx.x * cols;
  float* dst = out + (int64_t)blockIdx.x * cols;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += row[c] * row[c];
  s = block_reduce(s, SumOp());
  float scale = rsqrtf(s / (float)cols + 1e-6f);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = row[c] * scale;
}}
""",
    "row_logsumexp": """
__global__ void {name}_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {{
  const float* row = x + (int64_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_reduce(m, MaxOp());
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
  s = block_reduce(s, SumOp());
  if (threadIdx.x == 0) out[blockIdx.x] = m + logf(s);
}}
""",
}
ROW_WRAPPER = """
torch::Tensor {name}_forward(torch::Tensor x) {{
  TORCH_CHECK(x.is_cuda() && x.dim() == 2, "x must be a 2-D CUDA tensor");
  x = x.contiguous();
  auto out = {alloc};
  int64_t rows = x.size(0), cols = x.size(1);
  if (rows > 0) {{
    {name}_kernel<<<(unsigned)rows, {threads}>>>(x.data_ptr<float>(), out.data_ptr<float>(), cols);
  }}
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(err));
  return out;
}}"""


def kernel_source(op: Op, style: int = 1) -> str:
    if op.kind == "rows":
        return ROW_COMMON + row_kernel(op, style)
    names = ["x"] if op.kind == "unary" else ["x", "y"]
    loads = {"x": "float v = x[i];", "y": "float w = y[i];"}
    if style == 1:
        checks = "\n  ".join(
            f'TORCH_CHECK({n}.is_cuda(), "{n} must be a CUDA tensor");\n  {n} = {n}.contiguous();'
            for n in names
        )
    else:
        checks = "\n  ".join(
            f'TORCH_CHECK({n}.is_cuda() && {n}.scalar_type() == torch::kFloat32, "{n}: float32 CUDA tensor");'
            f"\n  {n} = {n}.contiguous();"
            for n in names
        )
    return (ELEMENTWISE if style == 1 else ELEMENTWISE_2).format(
        name=op.name,
        params=", ".join(f"const float* __restrict__ {n}" for n in names),
        loads=" ".join(loads[n] for n in names),
        expr=op.cuda_expr,
        tensors=", ".join(f"torch::Tensor {n}" for n in names),
        checks=checks,
        ptrs=", ".join(f"{n}.data_ptr<float>()" for n in names),
    )  # fmt: skip


def row_kernel(op: Op, style: int = 1) -> str:
    if op.name in ROW_REDUCE:
        init, acc, combine, finish = ROW_REDUCE[op.name]
        body = ROW_REDUCE_KERNEL.format(name=op.name, init=init, acc=acc, combine=combine, finish=finish)
    else:
        body = ROW_NORMALISE_KERNEL[op.name].format(name=op.name)
    reduces = op.name in ROW_REDUCE or op.name == "row_logsumexp"
    alloc = "torch::empty({rows_of_x}, x.options())" if reduces else "torch::empty_like(x)"
    alloc = alloc.replace("{rows_of_x}", "{x.size(0)}")
    return body + ROW_WRAPPER.format(name=op.name, alloc=alloc, threads=256 if style == 1 else 512)


def problem_source(op: Op, style: int = 1) -> str:
    """Style 2's problem is the same operator at another shape: its own reference, so its baselines are
    measured in the run too (a solution set is cold per problem)."""
    args = "x" if op.kind != "binary" else "x, y"
    shapes = {("rows", 1): (4096, 8192), ("rows", 2): (8192, 4096), 1: (4096, 4096), 2: (8192, 2048)}
    rows, cols = shapes[(op.kind, style)] if op.kind == "rows" else shapes[style]
    draw = "torch.rand(batch_size, dim) * 8 - 4"  # symmetric: activations are not the identity
    inputs = draw if op.kind != "binary" else f"{draw}, {draw}"
    title = op.name.replace("_", " ")
    return PROBLEM.format(title=title, args=args, expr=op.torch_expr, rows=rows, cols=cols, inputs=inputs)


def solution_source(op: Op, style: int = 1) -> str:
    args = "x" if op.kind != "binary" else "x, y"
    suffix = "" if style == 1 or op.kind == "rows" else "_v2"
    fn = f"{op.name}{suffix}_forward"
    decl = f"torch::Tensor {fn}({', '.join(f'torch::Tensor {a}' for a in args.split(', '))})"
    ext = f"{op.name}{'' if style == 1 else '_v2'}_ext"
    return SOLUTION.format(
        title=op.name.replace("_", " ") + ("" if style == 1 else " (style 2)"),
        kernel=kernel_source(op, style), decl=decl, module=ext, ext=ext, fn=fn, args=args,
    )  # fmt: skip


def files() -> dict[str, str]:
    """``problems/<stem>.py`` and ``solutions/<stem>.py`` -> source, for every operator in both styles."""
    out: dict[str, str] = {}
    for style in STYLES:
        for i, op in enumerate(OPS, 1 + (style - 1) * len(OPS)):
            stem = f"{i:02d}_{op.name}" + ("" if style == 1 else "_v2")
            out[f"problems/{stem}.py"] = problem_source(op, style)
            out[f"solutions/{stem}.py"] = solution_source(op, style)
    return out


def set_dir(root: Path | None = None) -> Path:
    """The directory holding ``problems/`` and ``solutions/`` (generated if missing)."""
    return materialize("load_inline_set", files(), root)


def main(argv: list[str] | None = None) -> int:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--out", type=Path, default=None, help="write here (default: the cache)")
    args = parser.parse_args(argv)
    print(f"{len(files()) // 2} problems and solutions in {set_dir(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
