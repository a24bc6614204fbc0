"""Normalises what a caller passes as CUDA sources into files to compile, headers to hash and include dirs.

Accepted: a mapping ``{"name.cu": text, "common.cuh": text}`` (written to a private build dir under those
names), a source string (contains a newline; named ``<name>.cu``), a path, or a list of paths (compiled in
place, so their relative ``#include``s work). Headers under the directories of path sources and under
``include_dirs`` (``*.h *.cuh *.hpp ...``, recursive, at most ``MAX_HEADERS``) are hashed into the cache key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

COMPILED = (".cu", ".cpp", ".cc", ".cxx", ".c")
HEADERS = (".h", ".cuh", ".hpp", ".hh", ".hxx", ".inl", ".inc", ".tcc")
MAX_HEADERS = 256


@dataclass
class SourceFile:
    display: str  # the name the user knows: mapping key, or the path as given
    text: str
    path: str | None = None  # absolute path of a file compiled in place; None for mapping sources


@dataclass
class SourceSet:
    compiled: list[SourceFile]
    written: dict[str, str] = field(default_factory=dict)  # relative name -> text, for mapping sources
    headers: list[tuple[str, str]] = field(default_factory=list)  # (display, sha-able text) hashed only
    include_dirs: list[str] = field(default_factory=list)  # absolute
    path_map: dict[str, str] = field(default_factory=dict)  # absolute path or dir prefix -> display

    def texts(self) -> dict[str, str]:
        """Display name -> text of every file a diagnostic can point to."""
        out = {f.display: f.text for f in self.compiled}
        out.update(self.written)
        return out

    def fingerprint(self) -> dict:
        import hashlib

        def h(text: str) -> str:
            return hashlib.sha256(text.encode()).hexdigest()

        return {
            "compiled": [[f.display, h(f.text)] for f in self.compiled],
            "written": sorted([name, h(text)] for name, text in self.written.items()),
            "headers": sorted([name, h(text)] for name, text in self.headers),
            "include_dirs": list(self.include_dirs),
        }


def _check_relative(name: str) -> str:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"source name {name!r} must be a relative path without '..'")
    return str(p)


def _scan_headers(directory: str, label: str, out: dict[str, str]) -> None:
    count = 0
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for fn in sorted(filenames):
            if not fn.endswith(HEADERS):
                continue
            count += 1
            if count > MAX_HEADERS:
                return
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, directory)
            try:
                out[os.path.join(label, rel)] = Path(full).read_text(errors="replace")
            except OSError:
                continue


def collect_sources(
    sources: Mapping[str, str] | str | os.PathLike | Sequence[str | os.PathLike],
    name: str,
    include_dirs: Sequence[str | os.PathLike] = (),
    display_root: str | os.PathLike | None = None,
) -> SourceSet:
    """``display_root``: report path sources relative to this directory (workspaces use it)."""
    if isinstance(sources, Mapping):
        written = {_check_relative(k): str(v) for k, v in sources.items()}
        compiled = [SourceFile(k, v) for k, v in written.items() if k.endswith(COMPILED)]
        if not compiled:
            raise ValueError(f"no compilable source ({', '.join(COMPILED)}) among {sorted(written)}")
        result = SourceSet(compiled=compiled, written=written)
    else:
        if isinstance(sources, str) and "\n" in sources:
            return collect_sources({f"{name}.cu": sources}, name, include_dirs)
        paths = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
        if not paths:
            raise ValueError("no CUDA sources given")
        result = SourceSet(compiled=[])
        headers: dict[str, str] = {}
        for p in paths:
            full = os.path.abspath(os.fspath(p))
            if not os.path.isfile(full):
                raise FileNotFoundError(f"CUDA source not found: {p}")
            if display_root is not None:
                display = os.path.relpath(full, os.fspath(display_root))
            else:
                display = os.fspath(p)
            result.compiled.append(SourceFile(display, Path(full).read_text(errors="replace"), full))
            result.path_map[full] = display
            parent_display = os.path.dirname(display)
            result.path_map[os.path.dirname(full) + "/"] = parent_display + "/" if parent_display else ""
            _scan_headers(os.path.dirname(full), parent_display, headers)
        result.headers = sorted(headers.items())
    for d in include_dirs:
        full = os.path.abspath(os.fspath(d))
        if not os.path.isdir(full):
            raise FileNotFoundError(f"include dir not found: {d}")
        result.include_dirs.append(full)
        extra: dict[str, str] = {}
        _scan_headers(full, os.fspath(d), extra)
        result.headers += sorted(extra.items())
        result.path_map.setdefault(full + "/", os.fspath(d).rstrip("/") + "/")
    return result
