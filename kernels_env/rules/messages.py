"""The versioned JSON-lines wire protocol between the sandbox client and its worker processes.

One message per line, UTF-8 JSON, always carrying ``"v": PROTOCOL_VERSION`` and a ``"kind"``. Requests and
replies are typed dataclasses; ``encode``/``decode`` convert them, and a message of another version or of an
unknown kind is a ``ProtocolError`` with a clear message (never silently misread).

Authentication (reward-hack #9/#14: candidates share a process with the worker): every request carries a
fresh random ``nonce``; the worker's progress messages and its one reply for that request carry the same nonce
and a sequence number counting from 0. The supervisor treats anything else on the channel during a request (a
malformed line, a wrong nonce or sequence number, a second reply) as a forgery by candidate code.

The *result* a caller receives (the one verdict schema) is described in ``kernels_env.rules.result``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# File descriptors of this process's protocol channel (set by the worker at start): the guard refuses
# candidate code that opens them, and forked compile children close them before any candidate code runs.
CHANNEL_FDS: set[int] = set()


class ProtocolError(ValueError):
    """A message that is not valid JSON, has another protocol version, or an unknown kind."""


@dataclass
class Source:
    """A Python source (``text``) or an agent workspace (``files``: relative path -> text) with a name."""

    name: str
    text: str | None = None
    files: dict[str, str] | None = None
    entry: str = "model_new.py"  # the module of a workspace that defines ModelNew

    def __post_init__(self) -> None:
        if (self.text is None) == (self.files is None):
            raise ProtocolError("a Source has exactly one of text or files")


@dataclass
class Hello:
    """First message of every worker: it is ready, and where it runs."""

    kind: ClassVar[str] = "hello"
    role: str
    pid: int
    environment: dict[str, Any] = field(default_factory=dict)


@dataclass
class CompileRequest:
    """Import the solution with the GPU hidden and ``KERNELS_ENV_BUILD_ONLY=1`` so every build is cached."""

    kind: ClassVar[str] = "compile"
    id: str
    reference: Source
    solution: Source
    workdir: str  # per-request directory the solution is materialised in (shared with the run stage)
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)
    nonce: str = ""  # per-request secret the reply must echo (see the module doc)
    import_timeout_s: float | None = None  # the imports' own time, builds excluded (None: timeout_s only)


@dataclass
class EvaluateRequest:
    """Check a solution against its reference (correctness trials) and time it."""

    kind: ClassVar[str] = "evaluate"
    id: str
    reference: Source
    solution: Source
    workdir: str
    judge: dict[str, Any]  # resolved judge settings (kernels_env.rules.protocols.resolve)
    env: dict[str, str] = field(default_factory=dict)
    nonce: str = ""
    # The first attempt's worker was killed at the host-memory limit in judge code: the smaller plan only.
    memory_retry: bool = False


@dataclass
class BaselineRequest:
    """Time the reference in the given modes (eager / compile / max-autotune), through the disk cache."""

    kind: ClassVar[str] = "baseline"
    id: str
    reference: Source
    modes: list[str]
    judge: dict[str, Any]
    cache_dir: str
    workdir: str
    nonce: str = ""


@dataclass
class ToolRequest:
    """Run one diagnostic tool (``kernels_env.tools``: compile, profile, sanitize, roofline).

    ``args`` are the tool's JSON arguments without paths: the worker materialises ``reference`` and
    ``solution`` under ``workdir`` and passes their paths. ``limits``: ``time_s`` and ``max_output_bytes``.
    The reply's payload is the tool response (``kernels_env.tools.run_tool``).
    """

    kind: ClassVar[str] = "tool"
    id: str
    tool: str
    args: dict[str, Any]
    limits: dict[str, Any]
    workdir: str
    reference: Source | None = None
    solution: Source | None = None
    env: dict[str, str] = field(default_factory=dict)
    nonce: str = ""


@dataclass
class Progress:
    """A run worker entered a stage of a request (tells a timeout where the candidate hung). An empty
    ``stage`` changes none; the other fields tell the host-memory limit (``judge.check.memory``) whose
    code runs (``owner``: judge | candidate), what the judge and the reference may hold on top of the limit
    (``host_bytes``) and the memory plan (kept for the verdict when the worker is killed). ``gpu_waiting``:
    the worker started (True) or stopped (False) waiting for its GPU's lock (``judge.timing.gpu_share``):
    time the supervisor does not count against the request's limit."""

    kind: ClassVar[str] = "progress"
    id: str
    stage: str
    detail: str = ""
    nonce: str = ""
    seq: int = 0
    owner: str = ""
    host_bytes: int | None = None
    memory_plan: dict[str, Any] | None = None
    gpu_waiting: bool | None = None


@dataclass
class Shutdown:
    kind: ClassVar[str] = "shutdown"


@dataclass
class Reply:
    """A worker's answer to one request: ``payload`` is stage-specific (see the worker modules)."""

    kind: ClassVar[str] = "reply"
    id: str
    payload: dict[str, Any]
    fatal: bool = False  # the worker is unusable afterwards (sticky CUDA error, tampering): restart it
    nonce: str = ""
    seq: int = 0


MESSAGES: dict[str, type] = {
    cls.kind: cls
    for cls in (
        Hello,
        CompileRequest,
        EvaluateRequest,
        BaselineRequest,
        ToolRequest,
        Progress,
        Shutdown,
        Reply,
    )
}


def to_dict(message: Any) -> dict[str, Any]:
    if type(message).__name__ not in {c.__name__ for c in MESSAGES.values()}:
        raise ProtocolError(f"not a protocol message: {type(message).__name__}")
    return {"v": PROTOCOL_VERSION, "kind": message.kind, **dataclasses.asdict(message)}


def from_dict(data: dict[str, Any]) -> Any:
    if not isinstance(data, dict):
        raise ProtocolError(f"a message is a JSON object, got {type(data).__name__}")
    version = data.get("v")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol version {version!r} is not supported (this sandbox speaks version "
            f"{PROTOCOL_VERSION}); client and workers must come from the same kernels_env"
        )
    kind = data.get("kind")
    cls = MESSAGES.get(kind)
    if cls is None:
        raise ProtocolError(f"unknown message kind {kind!r} (known: {sorted(MESSAGES)})")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields) - {"v", "kind"}
    if unknown:
        raise ProtocolError(f"{kind} message has unknown fields {sorted(unknown)}")
    values = {k: v for k, v in data.items() if k in fields}
    for name in ("reference", "solution"):
        if name in values and isinstance(values[name], dict):
            values[name] = Source(**values[name])
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProtocolError(f"malformed {kind} message: {exc}") from None


def encode(message: Any) -> bytes:
    """One JSON line (newline-terminated); non-finite floats become null (JSON has no NaN)."""
    return (json.dumps(_finite(to_dict(message)), separators=(",", ":")) + "\n").encode()


def decode(line: bytes | str) -> Any:
    if isinstance(line, bytes):
        if len(line) > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"message of {len(line)} bytes exceeds {MAX_MESSAGE_BYTES}")
        line = line.decode("utf-8", errors="replace")
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not a JSON line: {exc}: {line[:200]!r}") from None
    return from_dict(data)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
