"""compute-sanitizer (memcheck, racecheck, initcheck, synccheck): locate, build the command, parse.

The text format (every line prefixed ``========= ``) has been stable since compute-sanitizer 2020; the
location line comes in several shapes, all handled here::

    Invalid __global__ write of size 4 bytes
        at oob(float*, int)+0x70 in oob.cu:7          | at 0x90 in Kernel(args) | at 0x250 in f.cu:41:k(int*)
        by thread (31,0,0) in block (0,0,0)
        Address 0x7f.. is out of bounds                | Access at 0x.. is out of bounds
    Error: Race reported between Write access at k(...)+0x150 in f.cu:27
        and Read access at k(...)+0x160 in f.cu:30 [4194304 hazards]
    Uninitialized __global__ memory read of size 4 bytes
    ERROR SUMMARY: 1 error  |  RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

from __future__ import annotations

import glob
import re

from ..host.cuda import find_cuda_tool

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# not shared with fastpath.diagnostics: alike only as tables of regexes (compute-sanitizer's reports here)
_PREFIX = re.compile(r"^=========\s?")
_HEADLINE = re.compile(
    r"^(?P<kind>Invalid __\w+__ (?:read|write|atomic)[^\n]*?|Uninitialized __\w+__ memory read[^\n]*?|"
    r"Misaligned [^\n]*|Out-of-range [^\n]*|Malloc/Free error[^\n]*|Barrier error[^\n]*|"
    r"(?:Error|Warning|ERROR|WARNING|Info|INFO): Race reported[^\n]*|Program hit [^\n]*|"
    r"Leaked \d+ bytes[^\n]*|"
    r"Invalid (?:__global__|__shared__|__local__|address|PC)[^\n]*|Cuda [^\n]*error[^\n]*|"
    r"Hardware exception[^\n]*|Potential (?:RAW|WAR|WAW)[^\n]*|Warp (?:illegal|misaligned)[^\n]*)$"
)
_SIZE = re.compile(r"of size (\d+)")
_AT = re.compile(r"^\s*at (?P<loc>.+)$")
_THREAD = re.compile(r"by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_ADDR = re.compile(r"(?:Address|Access at|Access to) (0x[0-9a-fA-F]+)(?: is (?P<what>.+))?")
_NEAREST = re.compile(
    r"and is (\d+) bytes (after|before) the nearest allocation at (0x[0-9a-fA-F]+) of size "
    r"([\d,]+) bytes"
)
_FILE_LINE = re.compile(r"([\w./\\\-+]+\.(?:cu|cuh|cpp|cc|h|hpp|py|ptx)):(\d+)")
_RACE = re.compile(
    r"Race reported between (?P<a>Read|Write) access at (?P<la>.+?)\s+and (?P<b>Read|Write) access "
    r"at (?P<lb>.+?)(?:\s*\[(?P<n>[\d,]+) hazards?\])?\s*$",
    re.S,
)
_ERR_SUMMARY = re.compile(r"ERROR SUMMARY: ([\d,]+) errors?")
_RACE_SUMMARY = re.compile(
    r"RACECHECK SUMMARY: ([\d,]+) hazards? displayed \(([\d,]+) errors?, ([\d,]+) warnings?\)"
)
_NOT_PRINTED = re.compile(r"([\d,]+) errors? (?:were|was) not printed")
_SKIPPED = re.compile(r"([\d,]+) errors? (?:were|was) skipped")


def find_sanitizer() -> str | None:
    """``$KERNELS_ENV_COMPUTE_SANITIZER``, compute-sanitizer on PATH or in the CUDA toolkit."""
    bundled = sorted(glob.glob("/usr/local/cuda*/compute-sanitizer/compute-sanitizer"), reverse=True)
    return find_cuda_tool("compute-sanitizer", "KERNELS_ENV_COMPUTE_SANITIZER", bundled)


def sanitizer_command(
    sanitizer: str,
    tool: str,
    target: list[str],
    log_file: str,
    *,
    print_limit: int = 20,
    kernel_substring: str | None = None,
) -> list[str]:
    if tool not in TOOLS:
        raise ValueError(f"unknown sanitizer tool {tool!r}; expected one of {TOOLS}")
    cmd = [
        sanitizer,
        "--tool",
        tool,
        "--print-limit",
        str(print_limit),
        "--log-file",
        log_file,
        "--target-processes",
        "all",
        "--show-backtrace",
        "no",
    ]
    if tool == "memcheck":
        cmd += ["--leak-check", "no"]
    if kernel_substring:
        cmd += ["--kernel-name", f"kns={kernel_substring}"]
    return cmd + list(target)


def _location(loc: str) -> dict:
    """kernel, file, line from one ``at ...`` location string."""
    loc = loc.strip()
    out = {"kernel": None, "file": None, "line": None}
    fl = _FILE_LINE.search(loc)
    if fl:
        out["file"], out["line"] = fl.group(1), int(fl.group(2))
    m = re.match(r"^(?P<k>.+?)(?:\+|:)0x[0-9a-fA-F]+(?: in .*)?$", loc)  # kernel(args)+0x70 in f.cu:7
    if m and not m.group("k").startswith("0x"):
        out["kernel"] = m.group("k").strip()
        return out
    m = re.match(r"^0x[0-9a-fA-F]+ in (?P<rest>.+)$", loc)  # 0x90 in Kernel(args) | 0x250 in f.cu:41:k(int*)
    if m:
        rest = m.group("rest")
        if fl and rest.startswith(fl.group(0)):
            rest = rest[len(fl.group(0)) :].lstrip(":")
        out["kernel"] = rest.strip() or None
        return out
    m = re.match(r"^(?P<file>\S+:\d+) in (?P<k>.+)$", loc)  # f.cu:27 in update(float const*, float*)
    if m:
        out["kernel"] = m.group("k").strip()
    return out


def _records(text: str) -> list[list[str]]:
    """Split the report into records: each starts at a headline and runs until a blank ``=========`` line."""
    recs, cur = [], None
    for raw in text.splitlines():
        if not raw.startswith("========="):
            continue  # the application's own output interleaved with the report
        line = _PREFIX.sub("", raw).rstrip()
        if not line.strip():
            cur = None
            continue
        if _HEADLINE.match(line.strip()):
            cur = [line.strip()]
            recs.append(cur)
        elif cur is not None and (raw.startswith("=========  ") or line.startswith(" ")):
            cur.append(line.strip())
        else:
            cur = None
    return recs


def parse_sanitizer(text: str, tool: str = "memcheck") -> dict:
    """Findings deduplicated by (kind, kernel, file, line) with occurrence counts and the first sample."""
    findings: dict[tuple, dict] = {}
    for rec in _records(text):
        parsed = _race(rec) if "Race reported" in rec[0] else _access(rec)
        if parsed is None:
            continue
        key, info = parsed
        f = findings.setdefault(key, {**info, "count": 0, **({"hazards": 0} if "hazards" in info else {})})
        f["count"] += 1
        if "hazards" in info:
            f["hazards"] += info["hazards"]
    errors = sorted(findings.values(), key=lambda f: (f["severity"] != "error", -f["count"]))
    summary = _summary(text)
    n_err = sum(f["count"] for f in errors if f["severity"] == "error")
    completed = summary["reported"] is not None
    return {
        "tool": tool,
        "completed": completed,
        "error_count": summary["reported"] if completed else n_err,
        "findings": errors,
        "summary": summary,
        "clean": completed and summary["reported"] == 0 and not errors,
    }


def _race(rec: list[str]) -> tuple[tuple, dict] | None:
    """A racecheck record: (dedup key, finding with this record's hazard count), or None if unparsable."""
    head = rec[0]
    m = _RACE.search(" ".join(rec))
    if not m:
        return None
    a, b = _location(m.group("la")), _location(m.group("lb"))
    kind = f"shared-memory race: {m.group('a')} vs {m.group('b')}"
    info = {
        "kind": kind,
        "severity": "warning" if head.lower().startswith("warning") else "error",
        "kernel": a["kernel"] or b["kernel"],
        "file": a["file"],
        "line": a["line"],
        "other": {"access": m.group("b"), "file": b["file"], "line": b["line"]},
        "hazards": int((m.group("n") or "1").replace(",", "")),
    }
    return (kind, a["kernel"], a["file"], a["line"], b["file"], b["line"]), info


def _access(rec: list[str]) -> tuple[tuple, dict]:
    """A memcheck/initcheck/synccheck record: (dedup key, finding)."""
    head = rec[0]
    info: dict = {"kind": _kind_label(head), "severity": "error", "detail": head}
    info.update(kernel=None, file=None, line=None)
    s = _SIZE.search(head)
    if s:
        info["access_bytes"] = int(s.group(1))
    for line in rec[1:]:
        m = _AT.match(line)
        if m and info["kernel"] is None and info["file"] is None:
            info.update(_location(m.group("loc")))
        elif m := _THREAD.search(line):
            g = list(map(int, m.groups()))
            info["thread"], info["block"] = g[:3], g[3:]
        elif m := _ADDR.search(line):
            info["address"] = m.group(1)
            if m.group("what"):
                info["address_is"] = m.group("what").strip()
        elif m := _NEAREST.search(line):
            info["nearest_allocation"] = {
                "offset_bytes": int(m.group(1)),
                "side": m.group(2),
                "address": m.group(3),
                "size_bytes": int(m.group(4).replace(",", "")),
            }
    key = (info["kind"], info["kernel"], info["file"], info["line"], head if info["kernel"] is None else "")
    return key, info


def _summary(text: str) -> dict:
    """The tool's closing counts: errors reported (None if it never got there), not printed, skipped."""
    summary: dict = {"reported": None, "not_printed": 0}
    if m := _ERR_SUMMARY.search(text):
        summary["reported"] = int(m.group(1).replace(",", ""))
    if m := _RACE_SUMMARY.search(text):
        summary["reported"] = int(m.group(2).replace(",", ""))
        summary["race_hazards_displayed"] = int(m.group(1).replace(",", ""))
        summary["race_warnings"] = int(m.group(3).replace(",", ""))
    if m := _NOT_PRINTED.search(text):
        summary["not_printed"] = int(m.group(1).replace(",", ""))
    if m := _SKIPPED.search(text):  # "3840 errors were skipped (error buffer overflow)": not counted
        summary["skipped"] = int(m.group(1).replace(",", ""))
    return summary


def _kind_label(head: str) -> str:
    h = head.lower()
    if "uninitialized" in h:
        return "uninitialized read"
    if "misaligned" in h or "is misaligned" in h:
        return "misaligned access"
    if h.startswith("invalid __"):
        m = re.match(r"invalid (__\w+__) (read|write|atomic)", h)
        return f"invalid {m.group(1)} {m.group(2)}" if m else "invalid access"
    if h.startswith("program hit"):
        return "CUDA API error"
    if h.startswith("barrier error"):
        return "barrier error"
    if h.startswith("leaked"):
        return "leak"
    return head.split(" of size")[0][:60]
