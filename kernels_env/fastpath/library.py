"""``cuda_library``: CUDA sources -> nvcc -> cached shared library -> ctypes handle with checked calls."""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import cache, hooks, nvcc, toolchain
from .args import ERROR_RETURNS, ArgSpec, ctypes_restype, specs_for
from .common import FASTPATH_VERSION, BuildInfo, cuda_unavailable_reason
from .diagnostics import CompileError, KernelResources
from .prototypes import Prototype, parse_extern_c, parse_signature
from .sources import SourceSet, collect_sources

_CDLLS: dict[str, ctypes.CDLL] = {}
_CDLL_LOCK = threading.Lock()


class LauncherFunction:
    """One ``extern "C"`` host function. Call it with the C parameters in order; a trailing
    ``cudaStream_t`` may be omitted (torch's current stream is passed). Returns None for error-code
    launchers (int / cudaError_t: non-zero raises RuntimeError), else the C return value."""

    def __init__(self, library: CudaLibrary, proto: Prototype, cfunc=None):
        self.library = library
        self.prototype = proto
        self.specs: list[ArgSpec] = specs_for(proto)
        self.auto_stream = bool(self.specs) and self.specs[-1].kind == "stream"
        self.error_code = proto.ret in ERROR_RETURNS
        self._passable = not proto.variadic and all(
            s.kind not in ("unsupported", "opaque") for s in self.specs
        )
        self._cfunc = cfunc
        if cfunc is not None:
            cfunc.argtypes = [s.ctype or ctypes.c_void_p for s in self.specs]
            cfunc.restype = ctypes.c_int if self.error_code else ctypes_restype(proto.ret)
        self.__name__ = proto.name
        self.__doc__ = f"{proto}  [from {library.name}]"

    def __repr__(self) -> str:
        return f"<fastpath function {self.prototype}>"

    def __call__(self, *args):
        proto, where = self.prototype, f"{self.library.name}.{self.prototype.name}"
        if self._cfunc is None:
            raise RuntimeError(f"{where} cannot run: {self.library.unloaded_reason}")
        if not self._passable:
            raise TypeError(
                f"{where}: {proto} has parameters ctypes cannot pass (varargs, C++ references, or a type it "
                "does not know passed by value); take a pointer, or declare C types with signatures="
            )
        n = len(self.specs)
        if self.auto_stream and len(args) == n - 1:
            args = (*args, None)
        elif len(args) != n:
            expected = f"{n - 1} (or {n} with the stream)" if self.auto_stream else str(n)
            raise TypeError(f"{where} takes {expected} arguments, got {len(args)}: {proto}")
        devices: set = set()
        values = [spec.convert(v, where, devices) for spec, v in zip(self.specs, args)]
        if devices:
            _check_devices(devices, where)
        ret = self._cfunc(*values)
        err = self.library._last_error()
        if self.error_code and ret != 0:
            raise RuntimeError(f"{where} returned error {ret}: {self.library.error_string(ret)}")
        if err != 0:
            raise RuntimeError(f"CUDA error after {where}: {self.library.error_string(err)} (code {err})")
        return None if self.error_code else ret


def _check_devices(devices: set, where: str) -> None:
    import torch

    current = torch.cuda.current_device()
    if devices != {current}:
        raise ValueError(
            f"{where}: tensors are on cuda:{sorted(devices)} but the current device is cuda:{current}; "
            "use `with torch.cuda.device(...)`"
        )


class CudaLibrary:
    """A built shared library. Attributes are its ``extern "C"`` functions (see :class:`LauncherFunction`).

    ``functions``: name -> parsed prototype; ``resource_usage``: ptxas report per kernel;
    ``build``: :class:`BuildInfo` (cache hit, compile time, log, warnings); ``path``: the cached .so;
    ``loaded``: False in build-only mode or without a GPU (``unloaded_reason`` says why; calls raise).
    """

    def __init__(self, name: str, meta: dict, functions: dict[str, Prototype], build: BuildInfo):
        self.name = name
        self.path = meta["path"]
        self.functions = functions
        self.exports = meta.get("exports")
        self.resource_usage = [KernelResources.from_dict(r) for r in meta.get("resources", [])]
        self.build = build
        self.unloaded_reason = cuda_unavailable_reason()
        self._cdll = None
        self._bound: dict[str, LauncherFunction] = {}
        if self.unloaded_reason is None:
            self._cdll = _load(self.path, name)
            self._last_error = self._cdll.kernels_env_fastpath_last_error
            self._last_error.restype = ctypes.c_int
            self._error_string = self._cdll.kernels_env_fastpath_error_string
            self._error_string.restype = ctypes.c_char_p
            self._error_string.argtypes = [ctypes.c_int]
        build.loaded = self.loaded

    @property
    def loaded(self) -> bool:
        return self._cdll is not None

    @property
    def log(self) -> str:
        return self.build.log

    @property
    def diagnostics(self) -> list[dict]:
        return self.build.diagnostics

    def kernel_resources(self, name: str) -> KernelResources:
        """Resource usage of the kernel whose mangled, demangled or base name is ``name``."""
        for r in self.resource_usage:
            base = (r.demangled or r.name).split("(")[0].split("<")[0]
            if name in (r.name, r.demangled, base):
                return r
        raise KeyError(
            f"no kernel '{name}' in {self.name} (kernels: {[r.display_name for r in self.resource_usage]})"
        )

    def error_string(self, code: int) -> str:
        try:
            return self._error_string(int(code)).decode(errors="replace")
        except Exception:
            return f"error code {code}"

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(attr)
        bound = self.__dict__["_bound"]
        if attr in bound:
            return bound[attr]
        functions = self.__dict__["functions"]
        if attr in functions:
            cfunc = getattr(self._cdll, attr) if self._cdll is not None else None
            bound[attr] = fn = LauncherFunction(self, functions[attr], cfunc)
            self.__dict__[attr] = fn  # later lookups skip __getattr__
            return fn
        exports = self.__dict__.get("exports") or []
        if attr in exports:
            raise AttributeError(
                f"'{attr}' is exported by {self.name} but its prototype was not found in the sources "
                f"(macro-generated?); pass signatures={{'{attr}': 'int {attr}(...)'}}"
            )
        raise AttributeError(
            f"library '{self.name}' has no extern \"C\" function '{attr}' (functions: {sorted(functions)})"
        )

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.functions))

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"<CudaLibrary {self.name!r} {state}: {', '.join(sorted(self.functions))}>"


def _load(path: str, name: str) -> ctypes.CDLL:
    with _CDLL_LOCK:
        if path not in _CDLLS:
            import torch  # noqa: F401  (loads torch's libcudart/cuBLAS first, so the library binds to them)

            try:
                _CDLLS[path] = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            except OSError as exc:
                raise RuntimeError(f"cannot load the CUDA library '{name}' ({path}): {exc}") from exc
        return _CDLLS[path]


def _functions(
    srcs_texts: Sequence[str], meta: dict, signatures: Mapping[str, str] | None
) -> dict[str, Prototype]:
    protos: dict[str, Prototype] = {}
    for text in srcs_texts:
        for p in parse_extern_c(text):
            protos.setdefault(p.name, p)
    for fname, sig in (signatures or {}).items():
        proto = parse_signature(sig)
        if proto.name != fname:
            raise ValueError(f"signature for '{fname}' names another function: {sig!r}")
        protos[fname] = proto
    exports = meta.get("exports")
    if exports is not None:  # drop what the parser saw but the library does not export (#if 0, static, ...)
        protos = {k: v for k, v in protos.items() if k in exports}
    for internal in nvcc.SUPPORT_SYMBOLS:
        protos.pop(internal, None)
    return protos


@dataclass
class LibraryPlan:
    """Everything that determines a build, and its cache key (computed without compiling)."""

    sources: SourceSet
    name: str
    arch: str
    flags: list[str]
    link_flags: list[str]
    nvcc: str
    key: str


def plan_library(
    sources, name=None, extra_cuda_flags=(), libraries=(), include_dirs=(), arch=None, display_root=None
) -> LibraryPlan:
    srcs = collect_sources(sources, name or "cuda_library", include_dirs, display_root=display_root)
    name = name or Path(srcs.compiled[0].display).stem
    arch = toolchain.resolve_arch(arch)
    found, plain = nvcc.resolve_libraries(list(libraries))
    include = list(srcs.include_dirs) + [lib.include_dir for lib in found if lib.include_dir]
    flags = nvcc.compile_flags(arch, extra_cuda_flags, list(dict.fromkeys(include)))
    lflags = nvcc.link_flags(found, plain)
    nvcc_bin = toolchain.nvcc_path()
    payload = nvcc.key_payload(srcs, arch, [*flags, *lflags], found, plain, nvcc_bin, FASTPATH_VERSION)
    return LibraryPlan(srcs, name, arch, flags, lflags, nvcc_bin, cache.make_key(payload))


def cuda_library(
    sources: Mapping[str, str] | str | os.PathLike | Sequence[str | os.PathLike],
    name: str | None = None,
    extra_cuda_flags: Sequence[str] = (),
    libraries: Sequence[str] = (),
    *,
    include_dirs: Sequence[str | os.PathLike] = (),
    arch: str | None = None,
    signatures: Mapping[str, str] | None = None,
    _display_root: str | os.PathLike | None = None,
) -> CudaLibrary:
    """Builds CUDA sources into a cached shared library and returns a handle to its ``extern "C"`` functions.

    sources: ``{"file.cu": text, "common.cuh": text}``, a source string, a path, or a list of paths.
    name: label for messages (default: the first source's stem). extra_cuda_flags: appended to nvcc's
    command (``-O``/arch/``-cudart`` given here replace the defaults). libraries: e.g. ``("cublas",)``,
    found with headers in the toolkit or pip wheels and linked. arch: default per
    :func:`toolchain.resolve_arch`. signatures: explicit prototypes for functions the parser cannot see.
    Raises :class:`CompileError` with diagnostics when the build fails.
    """
    start = time.perf_counter()
    plan = plan_library(sources, name, extra_cuda_flags, libraries, include_dirs, arch, _display_root)
    srcs, name, arch, key = plan.sources, plan.name, plan.arch, plan.key
    flags, lflags, nvcc_bin = plan.flags, plan.link_flags, plan.nvcc
    root = cache.cache_root()

    def build(staging: Path) -> dict:
        work = cache.new_tmp_dir(root, f"work-{key[:16]}")
        try:
            return nvcc.build_shared_library(srcs, name, nvcc_bin, flags, lflags, staging, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    compile_start = time.perf_counter()
    observed = ("cuda_library", name, arch, srcs.texts(), [*flags, *lflags])
    try:
        meta, hit, waited = cache.get_or_build(key, nvcc.ARTIFACT, build, nvcc.compile_timeout_s() + 60, root)
    except CompileError as exc:
        hooks.report(*observed, error=exc)
        raise
    hooks.report(*observed, meta=meta, cache_hit=hit)
    compile_seconds = 0.0 if hit else time.perf_counter() - compile_start - waited
    info = BuildInfo(
        key=key,
        cache_hit=hit,
        seconds=0.0,
        compile_seconds=compile_seconds,
        built_seconds=float(meta.get("compile_seconds", 0.0)),
        waited_seconds=waited,
        artifact=meta["path"],
        arch=arch,
        toolchain=f"nvcc {meta.get('nvcc_release') or '?'}",
        log=meta.get("log", ""),
        diagnostics=meta.get("diagnostics", []),
    )
    functions = _functions([f.text for f in srcs.compiled], meta, signatures)
    lib = CudaLibrary(name, meta, functions, info)
    info.seconds = time.perf_counter() - start
    return lib


def workspace_library(workspace_dir: str | os.PathLike, name: str | None = None, **kwargs) -> CudaLibrary:
    """Builds every ``kernels/*.cu`` of an agent workspace (``model_new.py`` + ``kernels/``) into one library.

    Headers under ``kernels/`` are part of the cache key; diagnostics name files as ``kernels/<file>``.
    Keyword arguments are those of :func:`cuda_library`.
    """
    root = Path(workspace_dir)
    kernels = sorted((root / "kernels").glob("*.cu"))
    if not kernels:
        raise FileNotFoundError(f"no kernels/*.cu in workspace {root}")
    return cuda_library(kernels, name=name or root.resolve().name, _display_root=root, **kwargs)
