"""Read references and solutions given as a path, a workspace directory or source text."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...rules.messages import Source

MAX_WORKSPACE_BYTES = 16 * 1024 * 1024  # of text in one workspace (read here, written by the loader)
SKIP_DIRS = {"__pycache__", ".git", "build", ".ipynb_checkpoints"}


def read_source(value: str | os.PathLike | Source, what: str, allow_workspace: bool = False) -> Source:
    """A ``Source`` from a file path, a workspace directory (solutions only) or the source text itself."""
    if isinstance(value, Source):
        return value
    looks_like_path = isinstance(value, os.PathLike) or ("\n" not in value and len(value) < 4096)
    looks_like_path = looks_like_path and bool(str(value).strip())  # "" is an empty source, not the cwd
    if looks_like_path:
        path = Path(value).expanduser()
        if path.is_dir():
            if not allow_workspace:
                raise IsADirectoryError(f"{what} {path} is a directory; a {what} is one Python file")
            return read_workspace(path)
        if path.is_file():
            return Source(name=path.name, text=read_text(path, what))
        raise FileNotFoundError(f"{what} {value!s}: no such file or directory")
    return Source(name=f"<{what}>.py", text=value)


def read_text(path: Path, what: str) -> str:
    """The file's UTF-8 text; a ``ValueError`` naming the file when it is binary, not UTF-8 or unreadable
    (the caller's input: never a verdict on the candidate, whose file it may not even be)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        raise ValueError(f"{what} {path}: not UTF-8 text ({where}); a {what} is a Python source") from None
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot be read: {exc.strerror or exc}") from None


def read_workspace(path: Path, entry: str = "model_new.py") -> Source:
    """An agent workspace: every text file under ``path`` (``model_new.py`` plus e.g. ``kernels/*.cu``)."""
    if not (path / entry).is_file():
        raise FileNotFoundError(f"workspace {path} has no {entry}")
    files: dict[str, str] = {}
    total = 0
    for file in sorted(path.rglob("*")):
        rel = file.relative_to(path)
        if not file.is_file() or any(p in SKIP_DIRS or p.startswith(".") for p in rel.parts):
            continue
        if file.suffix in (".pyc", ".so", ".o", ".cubin", ".ptx", ".fatbin"):
            continue
        text = read_text(file, f"workspace {path}: file")
        total += len(text)
        if total > MAX_WORKSPACE_BYTES:
            raise ValueError(f"workspace {path} holds more than {MAX_WORKSPACE_BYTES} bytes of text")
        files[rel.as_posix()] = text
    return Source(name=path.name, files=files, entry=entry)


def source_hash(source: Source) -> str:
    h = hashlib.sha256()
    if source.text is not None:
        h.update(source.text.encode())
    else:
        for rel, text in sorted((source.files or {}).items()):
            h.update(rel.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def input_hashes(reference: str | os.PathLike, solution: str | os.PathLike) -> dict[str, str] | None:
    """The content hashes of a reference file and a solution (file or workspace: every file the judge reads),
    what a resumed results file compares; None when either cannot be read (judging it will say why)."""
    try:
        return {
            "reference": source_hash(read_source(Path(reference), "reference")),
            "solution": source_hash(read_source(Path(solution), "solution", allow_workspace=True)),
        }
    except (OSError, ValueError):
        return None


def display_stem(source: Source) -> str:
    name = Path(source.name).name
    return name[:-3] if name.endswith(".py") else name
