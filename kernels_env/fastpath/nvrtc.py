"""``nvrtc_kernel``: a device-only kernel compiled with NVRTC (through CuPy) into a cached cubin, launched on
torch tensors on torch's current stream through the CUDA driver API."""

from __future__ import annotations

import base64
import ctypes
import operator
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import _nvrtc_proc, cache, hooks, toolchain
from ._nvrtc_here import compile_here
from .args import ArgSpec, current_stream, specs_for
from .common import FASTPATH_VERSION, BuildInfo, build_only, cuda_unavailable_reason
from .diagnostics import (
    CompileError,
    KernelResources,
    demangle,
    parse_diagnostics,
    parse_ptxas_resources,
    truncate_log,
)
from .prototypes import Prototype, parse_kernels, parse_signature

_DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic shared memory beyond this needs an explicit opt-in per function


def _has_option(options: Sequence[str], *names: str) -> bool:
    return any(o == n or o.startswith(n + "=") or o.startswith(n) for o in options for n in names)


def nvrtc_options(arch: str, options: Sequence[str]) -> list[str]:
    """Defaults (arch, C++17, line info, ptxas -v, toolkit include dirs) that give way to the caller's own."""
    options = list(options)
    out = []
    if not _has_option(options, "-arch", "--gpu-architecture"):
        out.append(f"-arch={toolchain.normalize_arch(arch)}")
    if not _has_option(options, "-std", "--std"):
        out.append("-std=c++17")
    out += ["-lineinfo", "-Xptxas=-v"]
    out += [f"-I{d}" for d in toolchain.cuda_include_dirs()]
    return out + options


def _compile(source: str, filename: str, name: str, options: list[str], headers: Mapping[str, str]):
    """NVRTC build: in this process, or in a fresh one in build-only mode (see ``_nvrtc_proc``)."""
    if not build_only():
        return compile_here(source, filename, name, options, headers)
    request = {"source": source, "filename": filename, "name": name, "options": list(options)}
    out = _nvrtc_proc.run({"op": "compile", **request, "headers": dict(headers)})
    image = None if out["image"] is None else base64.b64decode(out["image"])
    return image, out["fmt"], out["lowered"], out["log"]


def _missing_kernel_error(name: str, filename: str, source: str, log: str) -> CompileError:
    found = sorted({k.name for k in parse_kernels(source)})
    diag = {
        "file": filename,
        "line": None,
        "column": None,
        "severity": "error",
        "message": f"no __global__ function '{name}' (kernels found: {', '.join(found) or 'none'})",
        "tool": "nvrtc",
    }
    return CompileError(f"NVRTC cannot find kernel '{name}' in {filename}", [diag], log, tool="nvrtc")


class NvrtcKernel:
    """A compiled kernel: ``k(grid, block, args, shared_mem=0, stream=None)``.

    grid/block: int or tuple of up to 3 ints. args: tuple in the kernel's parameter order, converted as in
    :mod:`.args` (types from the kernel's ``__global__`` declaration; an unknown type such as a template
    parameter takes a numpy scalar). stream: None (torch's current stream), a torch stream or a raw handle.
    """

    def __init__(self, name: str, meta: dict, proto: Prototype | None, build: BuildInfo):
        self.name = name
        self.lowered_name = meta["lowered_name"]
        self.path = meta["path"]
        self.format = meta.get("format", "cubin")
        self.prototype = proto
        self.specs: list[ArgSpec] | None = specs_for(proto) if proto is not None else None
        resources = [KernelResources.from_dict(r) for r in meta.get("resources", [])]
        self.resource_usage = next((r for r in resources if r.name == self.lowered_name), None)
        self.all_resources = resources
        self.build = build
        self.unloaded_reason = cuda_unavailable_reason()
        self._image = Path(self.path).read_bytes() if self.unloaded_reason is None else None
        self._functions: dict[int, int] = {}  # device -> CUfunction
        self._smem_optin: dict[int, int] = {}
        self._lock = threading.Lock()
        build.loaded = self.loaded

    @property
    def loaded(self) -> bool:
        return self._image is not None

    def __repr__(self) -> str:
        return (
            f"<NvrtcKernel {self.name!r} ({self.lowered_name}) {'loaded' if self.loaded else 'not loaded'}>"
        )

    def _function(self, device: int) -> int:
        from cupy.cuda import driver, runtime

        if driver.ctxGetCurrent() == 0 or driver.ctxGetDevice() != device:
            # Binds the device's primary context (the one torch uses) to this thread.
            runtime.setDevice(device)
        fn = self._functions.get(device)
        if fn is None:
            with self._lock:
                fn = self._functions.get(device)
                if fn is None:
                    try:
                        module = driver.moduleLoadData(self._image)
                        fn = driver.moduleGetFunction(module, self.lowered_name)
                    except driver.CUDADriverError as exc:
                        raise RuntimeError(
                            f"cannot load kernel {self.name} ({self.format} for {self.build.arch}) on "
                            f"cuda:{device}: {exc}"
                        ) from exc
                    self._functions[device] = fn
        return fn

    def __call__(self, grid, block, args, shared_mem: int = 0, stream=None):
        where = f"kernel {self.name}"
        if not self.loaded:
            raise RuntimeError(f"{where} cannot run: {self.unloaded_reason}")
        grid3, block3 = _dim3(grid, "grid"), _dim3(block, "block")
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        specs = self.specs
        if specs is None:
            specs = [
                ArgSpec(f"arg{i}", "?", "pointer" if hasattr(a, "data_ptr") else "opaque", None)
                for i, a in enumerate(args)
            ]
        if len(args) != len(specs):
            raise TypeError(f"{where} takes {len(specs)} arguments, got {len(args)}: {self.prototype}")
        import torch
        from cupy.cuda import driver

        devices: set = set()
        values = [s.c_value(s.convert(v, where, devices)) for s, v in zip(specs, args)]
        device = torch.cuda.current_device()
        if devices and devices != {device}:
            raise ValueError(
                f"{where}: tensors are on cuda:{sorted(devices)} but the current device is cuda:{device}"
            )
        if stream is None:
            stream_ptr = current_stream(device)
        elif hasattr(stream, "cuda_stream"):
            stream_ptr = int(stream.cuda_stream)
        else:
            stream_ptr = int(getattr(stream, "ptr", stream))
        fn = self._function(device)
        try:
            if shared_mem > max(_DEFAULT_SMEM_LIMIT, self._smem_optin.get(device, 0)):
                driver.funcSetAttribute(
                    fn, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_mem)
                )
                self._smem_optin[device] = int(shared_mem)
            params = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
            driver.launchKernel(fn, *grid3, *block3, int(shared_mem), stream_ptr, ctypes.addressof(params), 0)
        except driver.CUDADriverError as exc:
            raise RuntimeError(
                f"launch of {where} failed (grid {grid3}, block {block3}, shared_mem {shared_mem}): {exc}"
            ) from exc


def _dim3(value, what: str) -> tuple[int, int, int]:
    try:
        items = value if isinstance(value, (tuple, list)) else (value,)
        dims = tuple(operator.index(d) for d in items)
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3 or not all(d >= 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or a tuple of 1-3 positive ints, got {value!r}")
    return (*dims, *(1,) * (3 - len(dims)))


def _prototype(source: str, name: str, signature: str | None) -> Prototype | None:
    if signature is not None:
        return parse_signature(signature)
    base = re.split(r"[<\s(]", name.strip(), maxsplit=1)[0].split("::")[-1]
    matches = [k for k in parse_kernels(source) if k.name == base]
    return matches[0] if len(matches) == 1 else None


def nvrtc_kernel(
    source: str,
    name: str,
    options: Sequence[str] = (),
    *,
    headers: Mapping[str, str] | None = None,
    arch: str | None = None,
    filename: str | None = None,
    signature: str | None = None,
) -> NvrtcKernel:
    """Compiles ``name`` (a ``__global__`` function, or a template instance such as ``"k<float, 4>"``)
    from ``source`` with NVRTC into a cached cubin and returns a launchable :class:`NvrtcKernel`.

    headers: ``{"include name": text}`` visible to ``#include``; filename: the name diagnostics use
    (default ``<kernel>.cu``); signature: explicit ``__global__`` prototype when the parser cannot tell.
    Raises :class:`CompileError` with diagnostics when compilation fails.
    """
    start = time.perf_counter()
    headers = dict(headers or {})
    base = re.split(r"[<\s(]", name.strip(), maxsplit=1)[0]
    filename = filename or f"{base}.cu"
    arch = toolchain.resolve_arch(arch)
    opts = nvrtc_options(arch, options)
    version = toolchain.nvrtc_version()
    payload = {
        "kind": "nvrtc-cubin",
        "fastpath_version": FASTPATH_VERSION,
        "source": cache.make_key({"text": source}),
        "filename": filename,
        "name": name,
        "headers": sorted([k, cache.make_key({"text": v})] for k, v in headers.items()),
        "options": opts,
        "arch": arch,
        "nvrtc": version,
    }
    key = cache.make_key(payload)

    def build(staging: Path) -> dict:
        t0 = time.perf_counter()
        image, fmt, lowered, log = _compile(source, filename, name, opts, headers)
        texts = {filename: source, **headers}
        diagnostics = parse_diagnostics(log, "nvrtc", sources=texts)
        if image is None:
            if any(d.get("file") == "__nv_name_map" for d in diagnostics):
                raise _missing_kernel_error(name, filename, source, log)
            raise CompileError(
                f"NVRTC failed to compile '{name}' ({filename})", diagnostics, log, tool="nvrtc"
            )
        (staging / "kernel.bin").write_bytes(image)
        resources = parse_ptxas_resources(log)
        names = demangle(r.name for r in resources)
        for r in resources:
            r.demangled = names.get(r.name, r.name)
        return {
            "kind": "nvrtc",
            "name": name,
            "format": fmt,
            "lowered_name": lowered,
            "compile_seconds": time.perf_counter() - t0,
            "log": truncate_log(log),
            "diagnostics": diagnostics,
            "resources": [r.to_dict() for r in resources],
            "options": opts,
        }

    compile_start = time.perf_counter()
    observed = ("nvrtc_kernel", base, arch, {filename: source, **headers}, opts)
    try:
        meta, hit, waited = cache.get_or_build(key, "kernel.bin", build, 600.0)
    except CompileError as exc:
        hooks.report(*observed, error=exc, kernel=name)
        raise
    hooks.report(*observed, meta=meta, cache_hit=hit, kernel=name)
    info = BuildInfo(
        key=key,
        cache_hit=hit,
        seconds=0.0,
        compile_seconds=0.0 if hit else time.perf_counter() - compile_start - waited,
        built_seconds=float(meta.get("compile_seconds", 0.0)),
        waited_seconds=waited,
        artifact=meta["path"],
        arch=arch,
        toolchain=version,
        log=meta.get("log", ""),
        diagnostics=meta.get("diagnostics", []),
    )
    kernel = NvrtcKernel(name, meta, _prototype(source, name, signature), info)
    info.seconds = time.perf_counter() - start
    return kernel
