"""Turn compiler output and Python tracebacks into compact, structured messages for the agent.

Compiler diagnostics are dicts ``{file, line, column, severity, message}`` parsed from gcc/clang, nvcc (EDG
front end), NVRTC, ptxas and ld output. Tracebacks are trimmed to the candidate's own frames plus the frame
that raised, with harness paths replaced by the names the candidate knows.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterable, Mapping
from typing import Any

MAX_DIAGNOSTICS = 30
MAX_TEXT = 4000

_GCC = re.compile(
    r"^(?P<file>[^\s:][^:\n]*?):(?P<line>\d+):(?:(?P<column>\d+):)?\s*"
    r"(?P<severity>fatal error|error|warning|note|remark):\s*(?P<message>.*)$"
)
_EDG = re.compile(
    r"^(?P<file>[^\s(][^(\n]*?)\((?P<line>\d+)\):\s*(?P<severity>catastrophic error|error|warning|remark)"
    r"(?:\s*#[\w-]+)?:\s*(?P<message>.*)$"
)
_PTXAS = re.compile(r"^ptxas\s*(?P<severity>fatal|error|warning)\s*:\s*(?P<message>.*)$")
_LD = re.compile(r"^(?:/\S*/)?ld(?:\.\w+)?:\s*(?P<message>.*)$")

# load_inline prepends implicit headers to the sources it writes; map lines back to the candidate's strings.
LOAD_INLINE_OFFSETS = {"cuda.cu": (3, "cuda_sources"), "main.cpp": (1, "cpp_sources")}


def parse_compiler_output(text: str, aliases: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every diagnostic in ``text`` (errors first), at most ``MAX_DIAGNOSTICS``; ``aliases`` renames paths."""
    found: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    for raw in text.splitlines():
        line = raw.rstrip()
        diag = None
        for pattern in (_EDG, _GCC):
            m = pattern.match(line)
            if m:
                diag = {
                    "file": m["file"].strip(),
                    "line": int(m["line"]),
                    "column": int(m["column"]) if m.groupdict().get("column") else None,
                    "severity": _severity(m["severity"]),
                    "message": m["message"].strip(),
                }
                break
        if diag is None and (m := _PTXAS.match(line)):
            diag = _plain("ptxas", _severity(m["severity"]), m["message"])
        if diag is None and (m := _LD.match(line)) and not line.startswith("ld returned"):
            diag = _plain("ld", "error", m["message"])
        if diag is None:
            continue
        _rename(diag, aliases or {})
        key = (diag["file"], diag["line"], diag["severity"], diag["message"])
        if key not in seen:
            seen.add(key)
            found.append(diag)
    order = {"error": 0, "warning": 1, "note": 2, "remark": 3}
    found.sort(key=lambda d: order.get(d["severity"], 4))
    return found[:MAX_DIAGNOSTICS]


def _plain(file: str, severity: str, message: str) -> dict[str, Any]:
    return {"file": file, "line": None, "column": None, "severity": severity, "message": message.strip()}


def _severity(word: str) -> str:
    word = word.lower()
    return "error" if word in ("fatal error", "catastrophic error", "fatal") else word


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
    where = (
        d["file"]
        + (f":{d['line']}" if d.get("line") else "")
        + (f":{d['column']}" if d.get("column") else "")
    )
    return f"{where}: {d['severity']}: {d['message']}"


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
