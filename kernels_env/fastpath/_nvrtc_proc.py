"""NVRTC in a fresh process, for build-only mode: ``python -m kernels_env.fastpath._nvrtc_proc`` reads one
JSON request on stdin (``{"op": "version"}`` or ``{"op": "compile", source, filename, name, options,
headers}``) and writes one JSON answer on stdout (the image base64-encoded).

Why: the sandbox compiles candidates in children forked from a compile worker that imported torch, and on the
H200 image (torch 2.11 cu130, CuPy 14.2, 2026-11-30) every in-process NVRTC build in such a child died with
SIGSEGV, while the same builds ran in fresh processes. Build-only processes exist only to fill the cache, so
a process start (~0.5 s) per NVRTC build costs little there; processes that launch kernels compile in-process.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._nvrtc_here import compile_here, nvrtc_version_here

_ROOT = str(Path(__file__).resolve().parents[2])


def run(request: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
    """Answer ``request`` in a fresh interpreter (same environment, this checkout on its path)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(
        [sys.executable, "-m", "kernels_env.fastpath._nvrtc_proc"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=_ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"NVRTC helper process failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def main() -> int:
    request = json.loads(sys.stdin.read())
    if request["op"] == "version":
        answer: dict[str, Any] = {"version": nvrtc_version_here()}
    else:
        image, fmt, lowered, log = compile_here(
            request["source"], request["filename"], request["name"], request["options"], request["headers"]
        )
        answer = {
            "image": None if image is None else base64.b64encode(image).decode(),
            "fmt": fmt,
            "lowered": lowered,
            "log": log,
        }
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
