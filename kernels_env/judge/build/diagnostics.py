"""Turn compiler output and Python tracebacks into compact, structured messages for the agent.

Compiler diagnostics are dicts ``{file, line, column, severity, message}`` parsed (by the fast path's
parser) from gcc/clang, nvcc (EDG front end), NVRTC, ptxas and ld output. Tracebacks are trimmed to the
candidate's own frames plus the frame that raised, with harness paths replaced by the names the candidate
knows. ``compile_error_messages`` recognises every builder's compile errors (``kernels_env.fastpath``'s
``CompileError`` by duck typing, ``torch.utils.cpp_extension``, Triton, CuPy/NVRTC) as such messages.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from typing import Any

from ...fastpath.diagnostics import format_diagnostic as fmt
from ...fastpath.diagnostics import parse_diagnostics
from ...rules.result import message

MAX_DIAGNOSTICS = 30
MAX_TEXT = 4000
FIELDS = ("file", "line", "column", "severity", "message")

# load_inline prepends implicit headers to the sources it writes; map lines back to the candidate's strings.
LOAD_INLINE_OFFSETS = {"cuda.cu": (3, "cuda_sources"), "main.cpp": (1, "cpp_sources")}


def parse_compiler_output(text: str, aliases: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every diagnostic in ``text`` (errors first), at most ``MAX_DIAGNOSTICS``; ``aliases`` renames paths.

    The parsing is the fast path's (``kernels_env.fastpath.diagnostics.parse_diagnostics``: nvcc/EDG, NVRTC,
    gcc/clang, gas, ptxas, nvlink, ld); here each diagnostic keeps the result schema's five fields, a
    diagnostic without a file is named after its tool (``ptxas``, ``ld``), and paths are renamed.
    """
    found: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    for parsed in parse_diagnostics(text):
        diag = {k: parsed.get(k) for k in FIELDS}
        diag["file"] = diag["file"] or parsed.get("tool") or "?"
        _rename(diag, aliases or {})
        key = (diag["file"], diag["line"], diag["severity"], diag["message"])
        if key not in seen:
            seen.add(key)
            found.append(diag)
    order = {"error": 0, "warning": 1, "note": 2, "remark": 3}
    found.sort(key=lambda d: order.get(d["severity"], 4))
    return found[:MAX_DIAGNOSTICS]


def _rename(diag: dict[str, Any], aliases: Mapping[str, str]) -> None:
    path = diag["file"]
    for prefix, alias in sorted(aliases.items(), key=lambda kv: -len(kv[0])):
        if prefix and path.startswith(prefix):
            path = alias + path[len(prefix) :]
            break
    name = path.rsplit("/", 1)[-1]
    if name in LOAD_INLINE_OFFSETS and "torch_extensions" in diag["file"] and diag["line"] is not None:
        offset, label = LOAD_INLINE_OFFSETS[name]
        if diag["line"] > offset:
            diag["line"] -= offset
            path = label
    diag["file"] = path


def format_diagnostic(d: Mapping[str, Any]) -> str:
    """``file:line:column: severity: message`` (the fast path's format)."""
    return fmt(d)


def trim_traceback(exc: BaseException, candidate_files: Iterable[str], aliases: Mapping[str, str]) -> str:
    """The candidate's frames plus the innermost frame, then the exception line; harness paths renamed."""
    files = set(candidate_files)
    frames = traceback.extract_tb(exc.__traceback__)
    keep = [f for f in frames if f.filename in files]
    if frames and (not keep or keep[-1] is not frames[-1]):
        keep.append(frames[-1])
    lines = ["Traceback (candidate frames):"]
    for f in keep:
        lines.append(f'  File "{_alias(f.filename, aliases)}", line {f.lineno}, in {f.name}')
        if f.line:
            lines.append(f"    {f.line.strip()}")
    lines.extend(_alias(x.rstrip(), aliases) for x in traceback.format_exception_only(type(exc), exc))
    return truncate("\n".join(lines))


def exception_line(exc: BaseException, aliases: Mapping[str, str] | None = None) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return _alias(text[-1] if text else type(exc).__name__, aliases or {})[:500]


def _alias(text: str, aliases: Mapping[str, str]) -> str:
    for prefix, alias in sorted(aliases.items(), key=lambda kv: -len(kv[0])):
        if prefix:
            text = text.replace(prefix, alias)
    return text


def truncate(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    return text[:head] + f"\n... [{len(text) - limit} characters cut] ...\n" + text[-(limit - head) :]


def compile_error_messages(exc: BaseException, aliases: Mapping[str, str]) -> tuple[str, list[dict]] | None:
    """(one-line error, messages) when ``exc`` is a compile error of a known builder, else None."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if name == "CompileError" and hasattr(exc, "diagnostics"):  # kernels_env.fastpath or compatible
        diags = [dict(d) for d in (getattr(exc, "diagnostics", None) or []) if isinstance(d, Mapping)]
        log = str(getattr(exc, "log", "") or "")
        diags = _renamed(diags, aliases) if diags else parse_compiler_output(log, aliases)
        return _summarise("CUDA compilation failed", diags, log or str(exc))
    text = str(exc)
    if isinstance(exc, RuntimeError) and text.startswith("Error building extension"):
        return _summarise(text.split(":", 1)[0], parse_compiler_output(text, aliases), text)
    if name == "CompilationError" and module.startswith("triton"):
        diag = {
            "file": "triton",
            "line": None,
            "column": None,
            "severity": "error",
            "message": truncate(text, 2000),
        }
        return "Triton compilation failed: " + _first_line(text), [
            message("compiler", diag["message"], **diag)
        ]
    if module.startswith("cupy") and "CompileException" in name:
        return _summarise("NVRTC compilation failed", parse_compiler_output(text, aliases), text)
    return None


def _renamed(diags: list[dict], aliases: Mapping[str, str]) -> list[dict]:
    out = []
    for d in diags:
        d = {k: d.get(k) for k in ("file", "line", "column", "severity", "message")}
        for prefix, alias in aliases.items():
            if prefix and isinstance(d["file"], str) and d["file"].startswith(prefix):
                d["file"] = alias + d["file"][len(prefix) :]
        out.append(d)
    return out


def _summarise(title: str, diags: list[dict], log: str) -> tuple[str, list[dict]]:
    errors = [d for d in diags if d.get("severity") == "error"] or diags
    error = f"{title}: {format_diagnostic(errors[0])}" if errors else f"{title}: {_first_line(log)}"
    messages = [message("compiler", format_diagnostic(d), **d) for d in diags]
    messages.append(message("log", truncate(log)))
    return error, messages


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""
