"""Parsing of CUDA compiler output: diagnostics (nvcc / EDG front end, gcc, gas, ptxas, ld, NVRTC) and the
per-kernel resource usage that ``ptxas -v`` reports (registers, shared memory, spills, stack, constant banks).

Pure text functions without CUDA or torch, so the profiler and the sandbox can reuse them on any log.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

LOG_LIMIT = 20_000  # characters of a compiler log kept on errors and build records

# --- ptxas -v resource usage -------------------------------------------------------------------------

_COMPILING = re.compile(r"ptxas info\s*:\s*Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"ptxas info\s*:\s*Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*:\s*Used (\d+) registers(.*)$")
_COMPILE_TIME = re.compile(r"ptxas info\s*:\s*Compile time = ([\d.]+) ms")
_USED_ITEM = re.compile(r"(\d+)(?:\+(\d+))? bytes (smem|lmem|cumulative stack size|cmem\[(\d+)\])")
_BARRIERS = re.compile(r"used (\d+) barriers")


@dataclass
class KernelResources:
    """What ptxas reports for one function on one architecture (bytes unless named otherwise).

    ``entry`` is False for non-inlined device functions, which only get stack and spill figures.
    ``constant_bytes`` maps a constant bank to its size (ptxas prints cmem only for some targets, e.g.
    sm_80; for sm_90 nvcc 13 omits it, so an empty dict means "not reported", not zero).
    """

    name: str
    arch: str | None = None
    entry: bool = True
    demangled: str | None = None
    registers: int | None = None
    barriers: int | None = None
    shared_bytes: int = 0
    stack_frame_bytes: int = 0
    cumulative_stack_bytes: int | None = None
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    local_bytes: int = 0
    constant_bytes: dict[int, int] = field(default_factory=dict)
    compile_ms: float | None = None

    @property
    def display_name(self) -> str:
        return self.demangled or self.name

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores_bytes or self.spill_loads_bytes)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["constant_bytes"] = {str(k): v for k, v in self.constant_bytes.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> KernelResources:
        data = dict(data)
        data["constant_bytes"] = {int(k): int(v) for k, v in (data.get("constant_bytes") or {}).items()}
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def parse_ptxas_resources(text: str) -> list[KernelResources]:
    """Per-function resource usage from ``ptxas -v`` output (nvcc stderr or an NVRTC program log).

    One record per (function, arch), in the order ptxas reports them. Lines that are not resource
    reports (warnings, errors, other tools' output) are ignored, so a whole build log can be passed.
    """
    records: dict[tuple[str, str | None], KernelResources] = {}
    arch: str | None = None
    current: KernelResources | None = None  # the entry whose "Used ..." line comes next
    props: KernelResources | None = None  # the function whose stack line comes next

    def get(name: str, entry: bool) -> KernelResources:
        rec = records.get((name, arch))
        if rec is None:
            rec = records[(name, arch)] = KernelResources(name=name, arch=arch, entry=entry)
        rec.entry = rec.entry or entry
        return rec

    for line in text.splitlines():
        if m := _COMPILING.search(line):
            arch = m.group(2)
            current = props = get(m.group(1), entry=True)
        elif m := _PROPERTIES.search(line):
            name = m.group(1)
            props = current if current is not None and current.name == name else get(name, entry=False)
        elif m := _STACK.search(line):
            if props is not None:
                props.stack_frame_bytes, props.spill_stores_bytes, props.spill_loads_bytes = map(
                    int, m.groups()
                )
        elif m := _USED.search(line):
            if current is None:
                continue
            current.registers = int(m.group(1))
            rest = m.group(2)
            if b := _BARRIERS.search(rest):
                current.barriers = int(b.group(1))
            for item in _USED_ITEM.finditer(rest):
                size = int(item.group(1)) + int(item.group(2) or 0)
                kind = item.group(3)
                if kind == "smem":
                    current.shared_bytes = size
                elif kind == "lmem":
                    current.local_bytes = size
                elif kind == "cumulative stack size":
                    current.cumulative_stack_bytes = size
                else:
                    current.constant_bytes[int(item.group(4))] = size
        elif m := _COMPILE_TIME.search(line):
            if current is not None:
                current.compile_ms = float(m.group(1))
    return list(records.values())


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Demangled names via ``cu++filt`` or ``c++filt`` when installed; other names map to themselves."""
    names = [n for n in dict.fromkeys(names) if n]
    out = {n: n for n in names}
    mangled = [n for n in names if n.startswith("_Z")]
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not mangled or tool is None:
        return out
    try:
        proc = subprocess.run(
            [tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return out
    lines = proc.stdout.splitlines()
    if proc.returncode == 0 and len(lines) == len(mangled):
        out.update(zip(mangled, lines))
    return out


# --- diagnostics --------------------------------------------------------------------------------------

_EDG = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): (?P<sev>catastrophic error|internal error|error|warning|"
    r"remark|note)(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$"
)
_GCC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note|"
    r"Error|Warning|Fatal error): (?P<msg>.*)$"
)
_PTXAS = re.compile(r"^ptxas (?P<sev>error|warning|fatal)\s*: (?P<msg>.*)$")
_NVCC = re.compile(r"^(?:nvcc|nvlink|fatbinary|cudafe\+\+) (?P<sev>fatal|error|warning)\s*: (?P<msg>.*)$")
_UNDEFINED = re.compile(r"undefined reference to [`'‘](?P<sym>[^'’`]+)['’]")
_LD = re.compile(r"^(?:\S*/)?(?:ld|ld\.\w+|collect2)(?::| error:) (?P<msg>.*)$")
_GCC_ECHO = re.compile(r"^\s*\d*\s*\|")
_NOISE = re.compile(
    r"^(?:\d+ (?:catastrophic )?errors? detected in the compilation of|Remark: The warnings can be "
    r"suppressed|Compilation terminated|compilation terminated|collect2: error: ld returned|\S+: In function|"
    r"\S+: At global scope|\S+: Assembler messages:|In file included from|\s+from )"
)
_SEVERITY = {
    "catastrophic error": "error",
    "internal error": "error",
    "fatal error": "error",
    "fatal": "error",
    "Fatal error": "error",
    "Error": "error",
    "Warning": "warning",
}


def _diag(file, line, column, severity, message, tool, **extra) -> dict:
    out = {
        "file": file,
        "line": int(line) if line is not None else None,
        "column": int(column) if column is not None else None,
        "severity": _SEVERITY.get(severity, severity),
        "message": message.strip(),
        "tool": tool,
    }
    out.update({k: v for k, v in extra.items() if v})
    return out


_HOST_REWRITE = re.compile(r"__attribute__\(\((global|device|host|shared|constant|managed)\)\)")


def _edg_column(printed: str, caret_line: str, original: str | None) -> int | None:
    """1-based column of EDG's caret in the user's line.

    EDG echoes the line with a 2-space indent, sometimes after rewriting it (``__global__`` becomes
    ``__attribute__((global))`` in the host pass); then the column is found by the unchanged tail.
    """
    caret = caret_line.index("^") - 2
    shown = printed[2:] if printed.startswith("  ") else printed
    if caret < 0 or caret > len(shown):
        return None
    if original is None:
        original = _HOST_REWRITE.sub(lambda m: f"__{m.group(1)}__", shown)
    if original.rstrip() == shown.rstrip():
        return caret + 1
    tail = shown[caret:].rstrip()
    orig = original.rstrip()
    if tail and orig.endswith(tail):
        return len(orig) - len(tail) + 1
    return None


def _starts_diagnostic(line: str) -> bool:
    """A line that opens a new diagnostic (ends an EDG message's echoed source / context block)."""
    return any(p.match(line) for p in (_EDG, _GCC, _PTXAS, _NVCC))


def parse_diagnostics(
    text: str,
    tool: str = "nvcc",
    sources: Mapping[str, str] | None = None,
    path_map: Mapping[str, str] | None = None,
) -> list[dict]:
    """Structured diagnostics from a compiler log.

    Each is a dict with ``file`` (the user's name for it, via ``path_map``; None when the tool gives no
    file, e.g. ptxas and the linker), ``line`` and ``column`` (1-based or None), ``severity`` (error,
    warning, remark, note), ``message``, ``tool`` and, where given, ``code`` (EDG's diagnostic number),
    ``source`` (the offending line) and ``context`` (instantiation notes). ``sources`` (display name ->
    text) refines EDG columns.
    """
    path_map = dict(path_map or {})
    sources = dict(sources or {})
    lines = text.splitlines()
    out: list[dict] = []
    seen: set[tuple] = set()

    def name_of(path: str) -> str:
        path = path.strip()
        if path in path_map:
            return path_map[path]
        for prefix, repl in path_map.items():
            if prefix.endswith("/") and path.startswith(prefix):
                return repl + path[len(prefix) :]
        return path

    def add(d: dict) -> None:
        key = (d["file"], d["line"], d["column"], d["severity"], d["message"])
        if key not in seen:
            seen.add(key)
            out.append(d)

    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or _NOISE.match(line) or _GCC_ECHO.match(line):
            continue
        if m := _EDG.match(line):
            block = []
            while i < len(lines) and lines[i].strip() and not _starts_diagnostic(lines[i]):
                block.append(lines[i])
                i += 1
            file = name_of(m.group("file"))
            lineno = int(m.group("line"))
            column, context, echoed = None, [], None
            carets = [k for k, b in enumerate(block) if b.strip() == "^"]
            if carets and carets[0] >= 1:
                c = carets[0]
                src_lines = sources.get(file, "").splitlines() if file in sources else None
                original = src_lines[lineno - 1] if src_lines and 0 < lineno <= len(src_lines) else None
                column = _edg_column(block[c - 1], block[c], original)
                context = [b.strip() for b in block[: c - 1] + block[c + 1 :]]
                echoed = (original if original is not None else block[c - 1]).strip()
            else:
                context = [b.strip() for b in block]
            add(
                _diag(
                    file,
                    lineno,
                    column,
                    m.group("sev"),
                    m.group("msg"),
                    tool,
                    code=m.group("code"),
                    context=context,
                    source=echoed,
                )
            )
        elif m := _PTXAS.match(line):
            add(_diag(None, None, None, m.group("sev"), m.group("msg"), "ptxas"))
        elif m := _NVCC.match(line):
            add(_diag(None, None, None, m.group("sev"), m.group("msg"), line.split()[0]))
        elif m := _UNDEFINED.search(line):
            add(_diag(None, None, None, "error", f"undefined reference to '{m.group('sym')}'", "ld"))
        elif m := _GCC.match(line):
            add(
                _diag(
                    name_of(m.group("file")),
                    m.group("line"),
                    m.group("col"),
                    m.group("sev"),
                    m.group("msg"),
                    "host",
                )
            )
        elif (m := _LD.match(line)) and not line.rstrip().endswith(":"):
            msg = m.group("msg")
            severity = "warning" if msg.startswith("warning:") else "error"
            add(_diag(None, None, None, severity, msg.removeprefix("warning:"), "ld"))
    return out


def format_diagnostic(d: Mapping) -> str:
    where = d.get("file") or d.get("tool") or "?"
    if d.get("line") is not None:
        where += f":{d['line']}"
        if d.get("column") is not None:
            where += f":{d['column']}"
    return f"{where}: {d.get('severity', 'error')}: {d.get('message', '')}"


def truncate_log(text: str, limit: int = LOG_LIMIT) -> str:
    """Keeps the head (first errors) and the tail (summary) of a long log, marking the cut."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-(limit // 4) :]
    return f"{head}\n... [{len(text) - len(head) - len(tail)} characters truncated] ...\n{tail}"


class CompileError(RuntimeError):
    """A CUDA source failed to build (nvcc, the host compiler, ptxas, the linker or NVRTC).

    ``diagnostics``: list of dicts (see :func:`parse_diagnostics`), file names as the user gave them;
    ``log``: the raw compiler output (truncated to ``LOG_LIMIT`` characters, head and tail kept);
    ``str()``: a one-paragraph summary naming the first errors.
    """

    def __init__(self, message: str, diagnostics: Iterable[Mapping] = (), log: str = "", tool: str = "nvcc"):
        self.message = message
        self.diagnostics = [dict(d) for d in diagnostics]
        self.log = truncate_log(log)
        self.tool = tool
        super().__init__(self._summary())

    def _summary(self, shown: int = 3) -> str:
        errors = [d for d in self.diagnostics if d.get("severity") == "error"]
        if errors:
            lines = [format_diagnostic(d) for d in errors[:shown]]
            more = f" (+{len(errors) - shown} more)" if len(errors) > shown else ""
            return f"{self.message}: {len(errors)} error(s){more}\n  " + "\n  ".join(lines)
        tail = [ln for ln in self.log.strip().splitlines() if ln.strip()][-shown:]
        return self.message + ("\n  " + "\n  ".join(tail) if tail else "")

    def __reduce__(self):
        return (_rebuild_compile_error, (self.message, self.diagnostics, self.log, self.tool))

    def to_dict(self) -> dict:
        return {"message": self.message, "tool": self.tool, "diagnostics": self.diagnostics, "log": self.log}


def _rebuild_compile_error(message, diagnostics, log, tool) -> CompileError:
    return CompileError(message, diagnostics, log, tool)
