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
POOL = frozenset(
    {
        "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
        "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
        "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
        "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "mkldnn_max_pool2d",
        "lp_pool1d", "lp_pool2d",
    }
)  # fmt: skip
NORM = frozenset(
    {
        "batch_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit_functional", "_batch_norm_impl_index", "_batch_norm_with_update",
        "_batch_norm_no_update", "cudnn_batch_norm", "miopen_batch_norm", "layer_norm", "native_layer_norm",
        "group_norm", "native_group_norm", "instance_norm", "rms_norm", "_fused_rms_norm",
    }
)  # fmt: skip
ATTENTION = frozenset(
    {
        "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention_for_cpu",
        "_flash_attention_forward", "_efficient_attention_forward", "_fused_sdp_choice",
    }
)  # fmt: skip
RNN = frozenset(
    {
        "lstm", "gru", "rnn_tanh", "rnn_relu", "_cudnn_rnn", "_cudnn_rnn_flatten_weight",
        "_use_cudnn_rnn_flatten_weight", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell",
        "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    }
)  # fmt: skip
EMBEDDING = frozenset({"embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"})
# The operators KernelBench solutions typically leave in PyTorch: the library-heavy ones. Elementwise,
# activation, reduction, softmax and loss operators must be custom kernels even under this policy.
KERNELBENCH_FALLBACK = GEMM | CONV | POOL | NORM | ATTENTION | RNN | EMBEDDING | DATA_MOVEMENT

# Namespaces that hold PyTorch's own compute (anything else is a solution-registered custom op).
TORCH_NAMESPACES = frozenset(
    {"aten", "prims", "quantized", "_quantized", "mkldnn", "c10d", "_c10d_functional", "_dtensor",
     "_c10d_functional_autograd", "rngprims", "inductor", "higher_order", "sparse"}
)  # fmt: skip
# Namespaces that are bookkeeping, never compute.
NEUTRAL_NAMESPACES = frozenset({"profiler"})

# Kernel census categories (see _census.py).
CUSTOM, ALLOC_INIT, TORCH_KERNEL = "custom", "alloc_init", "torch"
BLAS, DNN, CUPY_BUILTIN, INDUCTOR = "library_blas", "library_dnn", "cupy_builtin", "inductor"
MEMCPY_H2D, MEMCPY_D2H, MEMCPY_D2D = "memcpy_h2d", "memcpy_d2h", "memcpy_d2d"

ALLOWED, FORBIDDEN, HOST_ESCAPE, RAW_MEMORY = "allowed", "forbidden", "host_escape", "raw_memory"
