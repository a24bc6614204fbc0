"""Kernel census: which kernels ran during forward, who launched them, and whether custom code did the work.

On a GPU the census comes from the torch profiler (CUPTI through Kineto): every device kernel and memcpy,
attributed to the outermost ATen operator that launched it (kernels launched outside any ATen operator came
from the candidate's own code: ctypes/fast path, CuPy, Triton, a load_inline function, or a library the
candidate called directly). Kernels are then classified by launcher and name. On a CPU the only kernels that
can run are Triton-interpreter launches, counted by wrapping the interpreter's grid executor.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field

from torch.autograd.profiler import record_function

from ..rules.operators import (
    ALLOC,
    ALLOC_INIT,
    BLAS,
    CONV,
    CUPY_BUILTIN,
    CUSTOM,
    DNN,
    GEMM,
    INDUCTOR,
    MEMCPY_D2D,
    MEMCPY_D2H,
    MEMCPY_H2D,
    TORCH_KERNEL,
    TORCH_NAMESPACES,
)
from ..rules.policies import Policy
from . import _checks

# not shared with fastpath.diagnostics: alike only as tables of regexes (kernel names here, not messages)
_INDUCTOR = re.compile(r"^(void )?triton_(poi|red|per|tem|for|mm|bmm|conv|unk|sort|scan)_")
_CUPY_BUILTIN = re.compile(r"^(void )?cupy_")
_BLAS = re.compile(
    r"^(void )?(sm\d+_xmma_gemm|ampere_\w*gemm|volta_\w*gemm|turing_\w*gemm|maxwell_\w*gemm|hopper_\w*gemm"
    r"|cutlass_\d+_|cutlass3x_|nvjet_|gemv2[NT]_kernel|gemvNSP|gemmSN_|gemmk1_kernel|splitKreduce_kernel"
    r"|cublasLt::|cublas|dot_kernel|gemv_kernel|scal_kernel|reduce_1Block_kernel|axpy_kernel|gemmStridedBatched)"
)
_BLAS_TEMPLATE = re.compile(
    r"cutlass::Kernel2?<cutlass(3x)?_|cublas|cublasLt"
)  # cuBLAS-internal instantiations
_NOT_A_KERNEL = re.compile(
    r"^(Context|Stream|Event|Device) Sync|^Activity Buffer|^cuda(Device|Stream|Event)Synchronize"
)
_DNN = re.compile(
    r"(cudnn|xmma_fprop|xmma_dgrad|xmma_wgrad|implicit_convolve_sgemm|precomputed_convolve|explicit_convolve"
    r"|winograd|conv2d_grouped_direct|nchwToNhwc|nhwcToNchw|nchwAddPadding|scalePackedTensor|cask_"
    r"|convolve_common_engine|fft2d_r2c|fft2d_c2r)"
)
_TORCH_NAME = re.compile(r"(at::native::|at::cuda::|c10::cuda::|void at::|at::\(anonymous)")


@dataclass(frozen=True)
class KernelLaunch:
    name: str
    category: str
    duration_us: float = 0.0
    launcher: str = ""  # the ATen/custom operator it was launched under, '' for the candidate's own code
    op: str = ""  # the operator the dispatch guard judged that launched it ('' when none did)


@dataclass
class Census:
    source: str  # 'cuda-profiler' | 'triton-interpreter'
    launches: list[KernelLaunch] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(Counter(k.category for k in self.launches))

    def _total_us(self) -> float:
        return sum(k.duration_us for k in self.launches if k.category != ALLOC_INIT)

    def time_us(self, categories) -> float:
        return sum(k.duration_us for k in self.launches if k.category in categories)

    def share(self, categories, without=frozenset()) -> float | None:
        """Share of the device time (fills excluded) in ``categories``; ``without``: categories left out of
        the denominator too."""
        total = self._total_us() - self.time_us(without)
        if total <= 0:
            return None
        return self.time_us(categories) / total

    def op_share(self, op: str) -> float | None:
        """Share of the device time (same base as ``share``) of the kernels operator ``op`` launched."""
        total = self._total_us()
        if total <= 0:
            return None
        return sum(k.duration_us for k in self.launches if k.op == op and k.category != ALLOC_INIT) / total

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "counts": self.counts(),
            "launches": [k.__dict__ for k in self.launches[:50]],
        }


def _op_name(event_name: str) -> tuple[str, str]:
    ns, _, rest = event_name.partition("::")
    return ns, rest.split(".")[0]


def classify_kernel(name: str, launcher: str = "") -> str:
    """Category of one device activity, from the operator that launched it (if any) and its name."""
    if name.startswith("Memcpy") or name.startswith("Memset"):
        if name.startswith("Memset"):
            return ALLOC_INIT
        if "DtoH" in name:
            return MEMCPY_D2H
        if "HtoD" in name:
            return MEMCPY_H2D
        return MEMCPY_D2D
    if launcher:
        ns, op = _op_name(launcher)
        if ns in TORCH_NAMESPACES:
            if op in ALLOC:
                return ALLOC_INIT
            if op in GEMM:
                return BLAS
            if op in CONV:
                return DNN
            return TORCH_KERNEL
    if _INDUCTOR.search(name):
        return INDUCTOR
    if _CUPY_BUILTIN.search(name):
        return CUPY_BUILTIN
    if _BLAS.search(name) or _BLAS_TEMPLATE.search(name):
        return BLAS
    if _DNN.search(name):
        return DNN
    if _TORCH_NAME.search(name):
        return ALLOC_INIT if "FillFunctor" in name else TORCH_KERNEL
    return CUSTOM


def _is_device(evt) -> bool:
    dt = getattr(evt, "device_type", None)
    return dt is not None and getattr(dt, "name", str(dt)).upper().endswith("CUDA")


def census_from_profiler(events, exclude_marker: str = "", judged_marker: str = "") -> Census:
    """Build the census from ``profile.events()`` (needs CPU and CUDA activities). ``judged_marker``: the
    dispatch guard's scope around each operator it judged; kernels under it are attributed to that operator
    (``KernelLaunch.op``: the name the verdict's ``torch_ops`` uses)."""
    cpu = [e for e in events if not _is_device(e)]
    launched_by: dict[str, list[tuple[str, str]]] = {}
    excluded: Counter[str] = Counter()

    def walk(e, outer: str, internal: bool, judged: str):
        name = e.name
        internal = internal or (exclude_marker and name == exclude_marker)
        ns, _ = _op_name(name) if "::" in name else ("", "")
        if not outer and ns and ns not in ("guard",) and not name.startswith("guard::"):
            outer = name
        for k in getattr(e, "kernels", ()) or ():
            if internal:
                excluded[k.name] += 1
            else:
                launched_by.setdefault(k.name, []).append((outer, judged))
        for c in e.cpu_children:
            inner = judged
            if judged_marker and name == judged_marker and "::" in c.name and not c.name.startswith("guard"):
                inner = c.name.split(".")[0]  # the judged call itself: aten::addmm (no overload)
            walk(c, outer, internal, inner)

    for e in cpu:
        if e.cpu_parent is None:
            walk(e, "", False, "")
    launches = []
    for e in sorted((e for e in events if _is_device(e)), key=lambda e: e.time_range.start):
        name = e.name
        if _NOT_A_KERNEL.search(name):
            continue  # synchronisation records and profiler bookkeeping on the device timeline
        if getattr(e, "is_user_annotation", False) or name.startswith("guard::"):
            # A record_function range mirrored on the device timeline (the guard's own ``guard::<hex>``
            # markers, or the candidate's): not a kernel. Counted, it made no_custom_kernel fail open and
            # skewed the work shares (issue 31).
            continue
        if excluded[name] > 0:
            excluded[name] -= 1
            continue
        queue = launched_by.get(name)
        launcher, op = queue.pop(0) if queue else ("", "")
        launches.append(
            KernelLaunch(name, classify_kernel(name, launcher), e.time_range.elapsed_us(), launcher, op)
        )
    return Census("cuda-profiler", launches)


def torch_op_summary(counts: Counter[str], census: Census | None) -> list[dict]:
    """The PyTorch operators that computed inside one forward, most frequent first: ``op`` (``aten::add``),
    ``count`` (calls) and ``share`` (of the device time, from a GPU census; null on a CPU)."""
    return [
        {"op": op, "count": n, "share": census.op_share(op) if census is not None else None}
        for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


class TritonInterpreterCounter:
    """Counts Triton-interpreter kernel launches (CPU mode) by wrapping ``GridExecutor.__call__``."""

    def __init__(self, marker: str = ""):
        self.marker = (
            marker  # a profiler scope around each launch: the interpreter's own copies are runtime work
        )
        self.launches: list[KernelLaunch] = []
        self._cls = None
        self._orig = None

    def __enter__(self):
        mod = sys.modules.get("triton.runtime.interpreter")
        cls = getattr(mod, "GridExecutor", None)
        if cls is None:
            return self
        self._cls, self._orig = cls, cls.__call__
        counter, orig = self, cls.__call__

        def counted_call(executor, *args, **kwargs):
            name = getattr(getattr(executor, "fn", None), "__name__", "triton_kernel")
            if counter.marker:
                with record_function(counter.marker):
                    result = orig(executor, *args, **kwargs)
            else:
                result = orig(executor, *args, **kwargs)
            counter.launches.append(KernelLaunch(name, CUSTOM, 0.0, ""))
            return result

        cls.__call__ = counted_call
        return self

    def __exit__(self, *exc):
        if self._cls is not None:
            self._cls.__call__ = self._orig
            self._cls = None

    def census(self) -> Census:
        return Census("triton-interpreter", list(self.launches))


# Vendor libraries (cuBLAS, cuDNN, CUTLASS) launched by PyTorch operators or the solution: under a work share,
# a GEMM kept in ``nn.Linear`` is nobody's decoy, and at today's sizes it can own 99% of the device time.
VENDOR = frozenset({BLAS, DNN})


def census_violations(
    census: Census, rules: Policy, output_pass_us: float | None = None
) -> list[_checks.Violation]:
    """The census against the policy. ``output_pass_us``: how long one pass over the forward's outputs takes
    at the device's measured copy bandwidth (GPU; None when unknown), for the work share (``_low_work``)."""
    out: list[_checks.Violation] = []
    counts = census.counts()
    if rules.forbid_d2h and counts.get(MEMCPY_D2H):
        out.append(
            _checks.Violation(
                _checks.HOST_ROUNDTRIP,
                f"{counts[MEMCPY_D2H]} device-to-host copies during forward (work done on the host?)",
                {"census": counts},
            )
        )
    bad = [k for k in census.launches if k.category not in rules.census_allowed]
    if bad:
        names = sorted({f"{k.name[:80]} [{k.category}]" for k in bad})
        out.append(
            _checks.Violation(
                _checks.LIBRARY_KERNEL,
                f"kernels the '{rules.name}' policy does not allow "
                f"ran during forward: {', '.join(names[:3])}",
                {"kernels": names[:20], "census": counts},
            )
        )
    work = [k for k in census.launches if k.category in rules.census_work]
    if len(work) < rules.min_work_launches:
        out.append(
            _checks.Violation(
                _checks.NO_CUSTOM_KERNEL,
                f"{len(work)} custom kernel launch(es) during "
                f"forward ({census.source}); at least {rules.min_work_launches} needed",
                {"census": counts},
            )
        )
    elif rules.min_work_share > 0:
        low = _low_work(census, rules, output_pass_us)
        if low is not None:
            out.append(low)
    return out


def _low_work(census: Census, rules: Policy, output_pass_us: float | None) -> _checks.Violation | None:
    """``low_custom_work`` (a decoy next to PyTorch doing the work), or None. The custom kernels pass with
    ``min_work_share`` of the device time, or, where vendor-library kernels take the rest, with that share of
    the time left without them *and* at least one pass over the outputs' bytes at the device's copy rate:
    a fused epilogue after a GEMM kept in ``nn.Linear`` reads and writes every output element, a decoy that
    touches one element next to ``torch.matmul`` does not, and PyTorch elementwise work still counts
    against the custom kernels."""
    share = census.share(rules.census_work)
    if share is None or share >= rules.min_work_share:
        return None
    own = census.share(rules.census_work, without=VENDOR - rules.census_work)
    work_us = census.time_us(rules.census_work)
    vendor_us = census.time_us(VENDOR - rules.census_work)
    if (
        vendor_us > 0
        and own is not None
        and own >= rules.min_work_share
        and output_pass_us is not None
        and work_us >= output_pass_us
    ):
        return None
    why = f"custom kernels took {share:.1%} of device time (< {rules.min_work_share:.0%})"
    if vendor_us > 0 and own is not None:
        why += f"; {own:.1%} without vendor-library kernels"
        if output_pass_us is not None:
            why += f", {work_us:.1f} us for outputs one pass over which takes {output_pass_us:.1f} us"
    evidence = {"share": share, "share_without_libraries": own, "custom_us": work_us}
    return _checks.Violation(_checks.LOW_CUSTOM_WORK, why, {**evidence, "output_pass_us": output_pass_us})
