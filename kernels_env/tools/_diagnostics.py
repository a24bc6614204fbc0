"""Compiler diagnostics (nvcc front end, NVRTC, host compiler, ptxas, nvlink) as ``file:line`` records.

nvcc/NVRTC: ``FILE(LINE): error: MSG`` / ``FILE(LINE): warning #177-D: MSG`` followed by the source line and
a caret line; gcc/clang host code: ``FILE:LINE:COL: error: MSG``; ptxas/nvlink: ``ptxas error   : MSG``.
Overlaps with the fast path's ``CompileError.diagnostics`` (kernels_env/fastpath); the lead may merge them.
"""

from __future__ import annotations

import re

_NV = re.compile(
    r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|warning|remark|catastrophic error)"
    r"(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$"
)
_GCC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|"
    r"note): (?P<msg>.*)$"
)
_TOOL = re.compile(
    r"^(?P<tool>ptxas|nvlink|nvcc|fatbinary)\s+(?P<sev>error|warning|fatal)\s*:\s*(?P<msg>.*)$"
)
_NVCC_FATAL = re.compile(r"^nvcc (?P<sev>fatal|error)\s*:\s*(?P<msg>.*)$")


def parse_diagnostics(text: str, path_map: dict[str, str] | None = None) -> list[dict]:
    """Every error/warning in ``text`` in order. ``path_map`` renames files (temp path -> agent's path).

    Each record: severity (error|warning|remark|note), file, line, column, code, message, source (the quoted
    source line nvcc prints under the message, if any), tool.
    """
    path_map = path_map or {}
    out: list[dict] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        rec = None
        m = _NV.match(line)
        if m:
            rec = {
                "severity": "error" if "error" in m.group("sev") else m.group("sev"),
                "file": m.group("file"),
                "line": int(m.group("line")),
                "column": None,
                "code": m.group("code"),
                "message": m.group("msg").strip(),
                "tool": "nvcc",
            }
            # nvcc quotes the offending source line (indented by 2) and a caret under the column.
            if i + 1 < len(lines) and lines[i + 1].startswith("  ") and lines[i + 1].strip():
                rec["source"] = lines[i + 1].strip()
                i += 1
                if i + 1 < len(lines) and lines[i + 1].strip() == "^":
                    rec["column"] = lines[i + 1].index("^") - 1
                    i += 1
        else:
            m = _GCC.match(line)
            if m and not line.startswith("ptxas"):
                sev = m.group("sev")
                rec = {
                    "severity": "error" if "error" in sev else sev,
                    "file": m.group("file"),
                    "line": int(m.group("line")),
                    "column": int(m.group("col")) if m.group("col") else None,
                    "code": None,
                    "message": m.group("msg").strip(),
                    "tool": "host",
                }
            else:
                m = _TOOL.match(line) or _NVCC_FATAL.match(line)
                if m:
                    sev = m.group("sev")
                    rec = {
                        "severity": "error" if sev in ("error", "fatal") else sev,
                        "file": None,
                        "line": None,
                        "column": None,
                        "code": None,
                        "message": m.group("msg").strip(),
                        "tool": m.groupdict().get("tool") or "nvcc",
                    }
        if rec is not None:
            if rec["file"] in path_map:
                rec["file"] = path_map[rec["file"]]
            out.append(rec)
        i += 1
    return out


def format_diagnostic(d: dict) -> str:
    where = ""
    if d.get("file"):
        where = f"{d['file']}:{d['line']}" + (f":{d['column']}" if d.get("column") else "") + ": "
    elif d.get("tool"):
        where = f"{d['tool']}: "
    code = f" [{d['code']}]" if d.get("code") else ""
    return f"{where}{d['severity']}{code}: {d['message']}"
