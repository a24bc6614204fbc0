"""Operators and kernels by kind, as the policies judge them (``rules.policies``) and the guard sees them.

Operators are named by their ATen overload-packet name (``mm`` for ``aten::mm.default``). Every policy allows
allocation, views and metadata; anything unknown is compute and forbidden unless the policy lists it
(fail closed). Operators from other namespaces (``torch.library`` ops a solution registers itself) are
custom kernels: allowed, and the profiler audit still judges the ATen calls they make inside.

Rules that are stricter than they might be, on purpose:
- ``clone``/``copy_``/``_to_copy`` (what a copying ``.contiguous()``, ``.to()``, ``.float()`` or
  ``reshape`` of a non-viewable tensor dispatch to) are compute under ``strict`` and ``cuda_agent``: a copy
  moves as many bytes as an elementwise kernel and would let PyTorch do the work of layout tasks.
  ``.contiguous()`` on an already contiguous tensor dispatches nothing and is always fine.
- ``item()``/``tolist()``/``numpy()`` move data to Python, where it could be computed on the host: forbidden.
- ``set_`` and ``resize_`` let a tensor adopt raw, unpoisoned memory: forbidden to candidate code (the
  Triton CPU interpreter's own use is runtime data movement and allowed).
"""

# Fresh memory: results are poisoned (NaN payload) so unwritten outputs are caught.
POISONED_ALLOC = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"}
)
# Allocation with defined contents (and initialisation fills, e.g. zeroing an atomicAdd accumulator).
ALLOC = POISONED_ALLOC | frozenset(
    {
        "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones",
        "new_full", "scalar_tensor", "lift_fresh", "lift_fresh_copy", "fill_", "zero_",
    }
)  # fmt: skip
VIEW = frozenset(
    {
        "view", "_unsafe_view", "_reshape_alias", "as_strided", "expand", "permute", "transpose", "t",
        "slice", "select", "narrow", "unsqueeze", "squeeze", "alias", "detach", "view_as_real",
        "view_as_complex", "unfold", "diagonal", "split", "split_with_sizes", "unbind", "unsafe_split",
        "unsafe_split_with_sizes", "chunk", "tensor_split", "movedim", "moveaxis", "swapaxes", "swapdims",
        "real", "imag", "view_as", "expand_as", "reshape", "reshape_as", "flatten", "unflatten",
        "contiguous", "resolve_conj", "resolve_neg", "numpy_T", "mT", "mH", "adjoint", "_unsafe_index_view",
    }
)  # fmt: skip
META = frozenset(
    {
        "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "record_stream",
        "is_pinned", "_has_compatible_shallow_copy_type", "_is_zerotensor", "is_conj", "is_neg",
        "is_complex", "is_floating_point", "is_inference", "_version", "size", "stride", "storage_offset",
        "is_contiguous", "dim", "numel", "_record_function_enter", "_record_function_enter_new",
        "_record_function_exit", "requires_grad_", "retain_grad", "_nested_tensor_size",
    }
)  # fmt: skip
# Ops whose schema marks ``self`` as written although they change allocator or autograd bookkeeping, never
# data: ``record_stream`` on an input (a synchronised side stream reads it) is not an input mutation.
BOOKKEEPING_WRITES = frozenset({"record_stream", "requires_grad_", "retain_grad"})
HOST_ESCAPE_OPS = frozenset({"_local_scalar_dense", "is_nonzero", "equal"})
RAW_MEMORY_OPS = frozenset({"set_", "resize_", "resize_as_", "_resize_output_"})
DATA_MOVEMENT = frozenset({"clone", "copy_", "_to_copy", "_copy_from", "_copy_from_and_resize", "to"})
# Ops the Triton CPU interpreter issues on behalf of a kernel launch (runtime data movement).
RUNTIME_DATA_MOVEMENT = DATA_MOVEMENT | RAW_MEMORY_OPS | ALLOC

GEMM = frozenset(
    {
        "mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "_addmm_activation",
        "matmul", "linear", "_scaled_mm", "_int_mm", "einsum", "tensordot", "bilinear",
    }
)  # fmt: skip
CONV = frozenset(
    {
        "convolution", "_convolution", "_convolution_mode", "conv1d", "conv2d", "conv3d",
        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cudnn_convolution",
        "cudnn_convolution_transpose", "cudnn_convolution_relu", "cudnn_convolution_add_relu",
        "convolution_overrideable", "mkldnn_convolution", "_slow_conv2d_forward", "slow_conv3d_forward",
        "slow_conv_transpose2d", "slow_conv_transpose3d", "slow_conv_dilated2d", "slow_conv_dilated3d",
        "thnn_conv2d", "_nnpack_spatial_convolution", "miopen_convolution", "_conv_depthwise2d",
        "conv_depthwise3d",
    }
)  # fmt: skip
# Namespaces that hold PyTorch's own compute (anything else is a solution-registered custom op).
TORCH_NAMESPACES = frozenset(
    {"aten", "prims", "quantized", "_quantized", "mkldnn", "c10d", "_c10d_functional", "_dtensor",
     "_c10d_functional_autograd", "rngprims", "inductor", "higher_order", "sparse"}
)  # fmt: skip
# Namespaces that are bookkeeping, never compute.
NEUTRAL_NAMESPACES = frozenset({"profiler"})


def torch_compute(namespace: str, name: str) -> bool:
    """A PyTorch operator that computes or moves data (what ``torch_ops`` in a verdict lists): not an
    allocation, a view or metadata, and not a solution-registered custom op."""
    return namespace in TORCH_NAMESPACES and name not in ALLOC and name not in VIEW and name not in META


# Kernel census categories (see _census.py).
CUSTOM, ALLOC_INIT, TORCH_KERNEL = "custom", "alloc_init", "torch"
BLAS, DNN, CUPY_BUILTIN, INDUCTOR = "library_blas", "library_dnn", "cupy_builtin", "inductor"
MEMCPY_H2D, MEMCPY_D2H, MEMCPY_D2D = "memcpy_h2d", "memcpy_d2h", "memcpy_d2d"

ALLOWED, FORBIDDEN, HOST_ESCAPE, RAW_MEMORY = "allowed", "forbidden", "host_escape", "raw_memory"
