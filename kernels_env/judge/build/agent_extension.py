"""CUDA Agent's released workspace layout, judged unchanged: the extension module ``model_new.py`` imports.

The layout (``agent_workdir`` of CUDA Agent): ``kernels/<name>.cu`` (CUDA, ``extern "C"`` launchers),
``kernels/<name>_binding.cpp`` (each registers itself in the static registry of ``binding_registry.h``), a
top-level ``binding.cpp`` whose ``PYBIND11_MODULE(cuda_extension, m)`` builds the module, ``utils/compile.sh``
-> ``utils/compile.py`` (``torch.utils.cpp_extension.load``, ``-O3 --use_fast_math``) and ``model_new.py``
doing ``import cuda_extension``.

The judge builds that module itself, with the same sources and flags as CUDA Agent's compile script, and
never runs the workspace's ``utils/`` (in CUDA Agent's harness those are protected files; here a candidate's
copy of them is just text: running it would let the candidate replace the judge's build). The built module
is registered in ``sys.modules`` under its ``PYBIND11_MODULE`` name before ``model_new.py`` is imported, so a
``cuda_extension.py`` or prebuilt ``cuda_extension.so`` shipped in the workspace never stands in for it
(binaries are not even read, ``judge.build.sources``).

Builds are content-addressed: the C/C++/CUDA files are copied (only when changed, so ninja's timestamps
hold) into ``<sandbox cache>/agent_extensions/<key>/src`` and built in ``.../build``, ``key`` being their
names and contents, the flags and the toolchain. The compile stage (build-only) and the run stage therefore
find the same build, and an identical workspace under another name is a cache hit.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ...rules.result import COMPILE_ERROR, message
from .cache import SANDBOX_CACHE_ENV, build_lock
from .diagnostics import compile_error_messages, exception_line
from .errors import LoadError

MODULE_RX = re.compile(r"PYBIND11_MODULE\s*\(\s*(\w+)\s*,")
DEFAULT_MODULE = "cuda_extension"
# CUDA Agent's utils/compile.py: torch.utils.cpp_extension.load with these flags.
EXTRA_CFLAGS = ("-O3",)
EXTRA_CUDA_CFLAGS = ("-O3", "--use_fast_math")
COMPILED = (".cu", ".cpp")  # what its compile script globs, in the root and in kernels/
COPIED = (".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".cuh", ".hpp", ".hh", ".hxx", ".inl", ".inc", ".tcc")
SKIPPED_DIRS = {"utils", "build", "__pycache__"}  # never part of the build (utils/ is the harness's)


@dataclass(frozen=True)
class Layout:
    root: Path
    module: str  # the name binding.cpp gives the module (model_new.py imports it)
    sources: tuple[str, ...]  # compiled, relative to root, sorted (as CUDA Agent's compile script)


def detect(root: Path) -> Layout | None:
    """The layout when ``root`` holds a top-level ``binding.cpp`` defining a pybind11 module and a
    ``kernels/`` directory; None otherwise (our own workspaces and plain solutions)."""
    binding = root / "binding.cpp"
    if not binding.is_file() or not (root / "kernels").is_dir():
        return None
    found = MODULE_RX.search(binding.read_text(errors="replace"))
    if found is None:
        return None
    module = found.group(1) if found.group(1) != "TORCH_EXTENSION_NAME" else DEFAULT_MODULE
    dirs = (root, root / "kernels")
    compiled = [p for d in dirs for p in d.iterdir() if p.suffix in COMPILED and p.is_file()]
    return Layout(root, module, tuple(sorted(p.relative_to(root).as_posix() for p in compiled)))


def install(layout: Layout, display_root: str) -> ModuleType:
    """Build the layout's module (or find it built) and register it in ``sys.modules``. A failed build is a
    ``LoadError(compile_error)`` whose diagnostics name the workspace's files (``ws/kernels/x.cu``).
    """
    module = build(layout, display_root)
    sys.modules[layout.module] = module
    INSTALLED.add(layout.module)
    return module


INSTALLED: set[str] = set()  # module names ``forget`` removes after a request


def forget() -> None:
    """Drop the modules ``install`` registered (the next request may bring its own ``cuda_extension``)."""
    while INSTALLED:
        sys.modules.pop(INSTALLED.pop(), None)


def build(layout: Layout, display_root: str) -> ModuleType:
    import torch.utils.cpp_extension as ce  # looked up at call time: the compile stage's build hooks apply

    base = extension_cache() / content_key(layout)
    src = base / "src"
    _copy_sources(layout.root, src)
    build_dir = base / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    try:
        with build_lock(build_dir):
            return ce.load(
                name=layout.module,
                sources=[str(src / rel) for rel in layout.sources],
                extra_cflags=list(EXTRA_CFLAGS),
                extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                build_directory=str(build_dir),
                with_cuda=any(rel.endswith(".cu") for rel in layout.sources),
            )
    except Exception as exc:
        aliases = {str(src) + os.sep: display_root, str(build_dir) + os.sep: display_root}
        raise _load_error(exc, aliases, display_root.rstrip("/") or "workspace") from None


def _load_error(exc: Exception, aliases: dict[str, str], label: str) -> Exception:
    compiled = compile_error_messages(exc, aliases)
    if compiled is None:  # not a compiler failure (e.g. the module failed to initialise): say what it was
        text = f"{label}: building its extension failed: {exception_line(exc, aliases)}"
        return LoadError(COMPILE_ERROR, text, [message("log", text)])
    error, messages = compiled
    return LoadError(COMPILE_ERROR, f"{label}: {error}", messages)


def extension_cache() -> Path:
    root = os.environ.get(SANDBOX_CACHE_ENV) or os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        root = os.path.join(tempfile.gettempdir(), f"kernels_env_{os.getuid()}")
    return Path(root) / "agent_extensions"


def _copied(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.suffix in COPIED and path.is_file() and not (set(rel.parts[:-1]) & SKIPPED_DIRS):
            yield path


def content_key(layout: Layout) -> str:
    """Names and contents of every file the build can read, the module name, flags and toolchain."""
    import torch

    h = hashlib.sha256()
    for path in _copied(layout.root):
        h.update(path.relative_to(layout.root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    env = [os.environ.get(k, "") for k in ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CXX")]
    for part in (layout.module, *layout.sources, *EXTRA_CFLAGS, *EXTRA_CUDA_CFLAGS, torch.__version__, *env):
        h.update(part.encode() + b"\0")
    h.update(str(torch.version.cuda).encode() + sys.version.encode())
    return h.hexdigest()[:32]


def _copy_sources(root: Path, dest: Path) -> None:
    """Write each file only when its content differs (ninja rebuilds what is newer than its object)."""
    for path in _copied(root):
        target = dest / path.relative_to(root)
        data = path.read_bytes()
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, target)
