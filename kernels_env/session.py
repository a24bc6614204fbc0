"""Per-episode agent workspace: the reference and harness files read-only, the files the agent may write,
and the diagnostic tools callable by name with JSON arguments, each under a time and an output-size limit.

    from kernels_env.session import WorkspaceSession
    with WorkspaceSession("problems/19_ReLU.py", client=sb) as ws:   # sb: a SandboxClient (else one is made)
        ws.write_file("model_new.py", text)
        print(ws.call("compile", '{"sass": true}')["text"])
        verdict = ws.evaluate()

The session never runs candidate code itself: tool calls go to the sandbox client (``SandboxClient.tool``),
whose workers run each tool on a fresh copy of the workspace, so nothing a candidate does reaches the files
here. ``evaluate()`` always judges a fresh snapshot of the agent's files against the ORIGINAL reference bytes
with the full harness (``SandboxClient.evaluate``), never trusting earlier tool output.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .client import SandboxClient
from .rules.config import SandboxConfig
from .tools._context import DEFAULT_TIME_S

REFERENCE_NAME = "model.py"
SOLUTION_NAME = "model_new.py"
WRITABLE_DIRS = ("kernels",)
WRITABLE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".c", ".py", ".txt", ".md", ".json")


class WorkspaceError(Exception):
    """A refused file operation (path outside the workspace, protected file, size limit)."""


@dataclass
class WorkspaceLimits:
    max_file_bytes: int = 1_000_000
    max_total_bytes: int = 16_000_000
    max_files: int = 200


@dataclass
class SessionToolLimits:
    """Per-tool limits the agent's calls run under (agents cannot raise them)."""

    time_s: dict = field(default_factory=lambda: dict(DEFAULT_TIME_S))
    max_output_bytes: int = 16_000

    def for_tool(self, name: str) -> dict:
        return {"time_s": self.time_s.get(name, 120.0), "max_output_bytes": self.max_output_bytes}


Executor = Callable[[str, dict, dict], dict]


def client_executor(client) -> Executor:
    """Tool calls through a sandbox client: ``client.tool(name, args, limits)`` (the session's default)."""

    def run(name: str, args: dict, limits: dict) -> dict:
        return client.tool(name, args, limits)

    return run


class WorkspaceSession:
    """``client``: the sandbox client tools and the final evaluation go through (default: one made from
    ``config`` on first use and closed with the session). ``executor(name, args, limits) -> response``
    replaces the client for tool calls (tests, custom hosts)."""

    def __init__(
        self,
        reference: str | os.PathLike,
        *,
        root: str | os.PathLike | None = None,
        harness_files: dict[str, str | os.PathLike] | None = None,
        initial_files: dict[str, str] | None = None,
        limits: WorkspaceLimits | None = None,
        tool_limits: SessionToolLimits | None = None,
        client: Any = None,
        config: Any = None,
        executor: Executor | None = None,
    ):
        self.limits = limits or WorkspaceLimits()
        self.tool_limits = tool_limits or SessionToolLimits()
        self.executor = executor
        self._client, self._config, self._own_client = client, config, client is None
        self.problem = Path(reference).stem
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="kernels_env_ws_") if root is None else root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        if any(self.root.iterdir()):
            raise WorkspaceError(f"workspace root {self.root} is not empty")
        self._reference_bytes = Path(reference).read_bytes()
        self._protected: dict[str, bytes] = {REFERENCE_NAME: self._reference_bytes}
        for name, src in (harness_files or {}).items():
            rel = self._normalise(name)
            self._protected[rel] = Path(src).read_bytes()
        for rel, data in self._protected.items():
            self._write_protected(rel, data)
        for d in WRITABLE_DIRS:
            (self.root / d).mkdir(exist_ok=True)
        for rel, content in (initial_files or {}).items():
            self.write_file(rel, content)
        self.history: list[dict] = []

    # -- files -----------------------------------------------------------------------------------------------
    @staticmethod
    def _normalise(rel: str) -> str:
        if not isinstance(rel, str) or not rel or "\x00" in rel:
            raise WorkspaceError("a path must be a non-empty string")
        p = PurePosixPath(rel.replace("\\", "/"))
        if p.is_absolute():
            raise WorkspaceError(f"{rel!r}: absolute paths are not allowed; use a path inside the workspace")
        if any(part == ".." for part in p.parts):
            raise WorkspaceError(f"{rel!r}: '..' would leave the workspace")
        parts = [x for x in p.parts if x not in ("", ".")]
        if not parts:
            raise WorkspaceError(f"{rel!r} is not a file path")
        return "/".join(parts)

    def _inside(self, rel: str) -> Path:
        """Absolute path of ``rel``; refuses any symlink on the way and anything resolving outside."""
        path = self.root
        for part in rel.split("/"):
            path = path / part
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                raise WorkspaceError(f"{rel!r}: symbolic links are not allowed in the workspace")
        real = Path(os.path.realpath(path))
        if real != self.root and self.root not in real.parents:
            raise WorkspaceError(f"{rel!r} resolves outside the workspace")
        return path

    def is_writable(self, rel: str) -> bool:
        try:
            self._check_writable(self._normalise(rel))
            return True
        except WorkspaceError:
            return False

    def _check_writable(self, rel: str) -> None:
        if rel in self._protected:
            raise WorkspaceError(f"{rel!r} is read-only (reference/harness file)")
        top = rel.split("/")[0]
        if rel != SOLUTION_NAME and top not in WRITABLE_DIRS:
            raise WorkspaceError(
                f"{rel!r}: the agent may write {SOLUTION_NAME} and files under "
                f"{', '.join(d + '/' for d in WRITABLE_DIRS)} only"
            )
        if rel != SOLUTION_NAME and not rel.endswith(WRITABLE_SUFFIXES):
            raise WorkspaceError(f"{rel!r}: allowed file types are {', '.join(WRITABLE_SUFFIXES)}")

    def write_file(self, rel: str, content: str | bytes) -> dict:
        rel = self._normalise(rel)
        self._check_writable(rel)
        data = content.encode() if isinstance(content, str) else bytes(content)
        if len(data) > self.limits.max_file_bytes:
            raise WorkspaceError(
                f"{rel!r}: {len(data)} bytes exceeds the per-file limit of {self.limits.max_file_bytes}"
            )
        path = self._inside(rel)
        existing = {f["path"]: f["bytes"] for f in self.list_files()}
        total = sum(existing.values()) - existing.get(rel, 0) + len(data)
        if total > self.limits.max_total_bytes:
            raise WorkspaceError(
                f"workspace would hold {total} bytes, over the limit of {self.limits.max_total_bytes}"
            )
        if rel not in existing and len(existing) + 1 > self.limits.max_files:
            raise WorkspaceError(
                f"workspace already holds {len(existing)} files (limit {self.limits.max_files})"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        self._inside(rel)  # the parent chain again, now that it exists
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return {"path": rel, "bytes": len(data)}

    def read_file(self, rel: str, max_bytes: int | None = None) -> str:
        rel = self._normalise(rel)
        path = self._inside(rel)
        if not path.is_file():
            raise WorkspaceError(f"{rel!r} does not exist")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            data = f.read(max_bytes or self.limits.max_file_bytes)
        return data.decode("utf-8", "replace")

    def delete_file(self, rel: str) -> None:
        rel = self._normalise(rel)
        self._check_writable(rel)
        path = self._inside(rel)
        if path.is_file():
            path.unlink()

    def list_files(self) -> list[dict]:
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            for fn in filenames:
                p = Path(dirpath) / fn
                rel = p.relative_to(self.root).as_posix()
                st = os.lstat(p)
                out.append(
                    {
                        "path": rel,
                        "bytes": st.st_size,
                        "writable": self.is_writable(rel),
                        "symlink": stat.S_ISLNK(st.st_mode),
                    }
                )
            dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink() and d != "__pycache__"]
        return sorted(out, key=lambda f: f["path"])

    def _write_protected(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.chmod(0o644) if not path.is_symlink() else None
                path.unlink()
        path.write_bytes(data)
        path.chmod(0o444)

    def restore_protected(self) -> list[str]:
        """Put back any reference/harness file that changed on disk (e.g. written by candidate code during a
        tool run). Returns the restored names."""
        restored = []
        for rel, data in self._protected.items():
            p = self.root / rel
            ok = (
                p.is_file()
                and not p.is_symlink()
                and hashlib.sha256(p.read_bytes()).digest() == hashlib.sha256(data).digest()
            )
            if not ok:
                self._write_protected(rel, data)
                restored.append(rel)
        return restored

    # -- tools -----------------------------------------------------------------------------------------------
    def call(self, tool: str, args: dict | str | None = None) -> dict:
        """Run a tool by name with JSON arguments; ``reference`` and ``solution`` are the workspace's own."""
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError as e:
                return self._record(
                    tool,
                    {},
                    {
                        "ok": False,
                        "tool": tool,
                        "error": f"arguments are not JSON: {e}",
                        "text": f"{tool}: arguments are not JSON: {e}",
                        "result": None,
                    },
                )
        if not isinstance(args or {}, dict):
            return self._record(
                tool,
                {},
                {
                    "ok": False,
                    "tool": tool,
                    "error": "arguments must be a JSON object",
                    "text": f"{tool}: arguments must be a JSON object",
                    "result": None,
                },
            )
        args = dict(args or {})
        for key in ("reference", "solution", "cache_dir"):
            args.pop(key, None)  # the agent cannot point tools at other files
        restored = self.restore_protected()
        args["reference"] = str(self.root / REFERENCE_NAME)
        args["solution"] = str(self.root)
        run = self.executor or client_executor(self.client)
        resp = run(tool, args, self.tool_limits.for_tool(tool))
        restored += self.restore_protected()
        if restored:
            resp.setdefault("warnings", []).append(
                f"protected file(s) {sorted(set(restored))} were modified and have been restored"
            )
        return self._record(tool, args, resp)

    def _record(self, tool: str, args: dict, resp: dict) -> dict:
        self.history.append({"tool": tool, "ok": resp.get("ok"), "elapsed_s": resp.get("elapsed_s")})
        return resp

    @property
    def client(self):
        """The sandbox client of this session (made on first use unless one was given)."""
        if self._client is None:
            self._client = SandboxClient(self._config or SandboxConfig())
        return self._client

    # -- final evaluation -----------------------------------------------------------------------------------
    def snapshot(self, dest: str | os.PathLike | None = None) -> Path:
        """A fresh copy of the agent's writable files plus the ORIGINAL reference bytes."""
        dest = Path(dest or tempfile.mkdtemp(prefix="kernels_env_eval_"))
        dest.mkdir(parents=True, exist_ok=True)
        for f in self.list_files():
            if f["writable"] and not f["symlink"]:
                out = dest / f["path"]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes((self.root / f["path"]).read_bytes())
        (dest / REFERENCE_NAME).write_bytes(self._reference_bytes)
        return dest

    def evaluate(self, evaluator: Callable[[str, str], dict] | None = None, judge: Any = None) -> dict:
        """Judge a fresh snapshot with the full harness: ``self.client.evaluate`` (with ``judge``, a
        ``JudgeConfig``), or ``evaluator(reference_path, solution_dir)``. Earlier tool results are never
        consulted."""
        tmp = Path(tempfile.mkdtemp(prefix="kernels_env_eval_"))
        snap = self.snapshot(tmp / self.problem)  # named after the problem: results name the solution so
        try:
            if evaluator is not None:
                return evaluator(str(snap / REFERENCE_NAME), str(snap))
            return self.client.evaluate(
                reference=str(snap / REFERENCE_NAME), solution=str(snap), judge=judge, problem=self.problem
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def close(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None
        if self._own_root:
            for p in self.root.rglob("*"):
                if p.is_file() and not p.is_symlink():
                    p.chmod(0o644)
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> WorkspaceSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
