"""CUDA-side checks around a guarded forward: side-stream races and swallowed launch errors.

- Stream race (catalogue #7): after forward returns, wait for the *current* stream only and snapshot the
  outputs; then synchronise the whole device and compare. Work still writing the output on another stream
  after the current stream finished (what an event timer on the current stream would have missed) shows up
  as a difference.
- Launch errors (catalogue #18): a sticky error surfaces at device synchronisation; a non-sticky launch
  error (bad grid, too much shared memory) that the candidate ignored stays in the runtime's last-error slot.
  Every CUDA runtime loaded in the process is asked (torch's and the system one a fast-path library links
  are separate copies with separate state).
"""

from __future__ import annotations

import ctypes
import os

import torch

from . import _checks


def _bytes(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().contiguous()
    return t.view(torch.uint8) if t.element_size() == 1 else t.reshape(-1).view(torch.uint8)


_CHUNK_BYTES = 1 << 26  # a whole-output comparison allocated a mask of the output's size in bytes


def _equal_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    x, y = _bytes(a), _bytes(b)
    if x.numel() != y.numel():
        return False
    step = _CHUNK_BYTES
    return all(torch.equal(x[i : i + step], y[i : i + step]) for i in range(0, x.numel(), step))


def snapshot_after_current_stream(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    torch.cuda.current_stream().synchronize()
    return [o.detach().clone() for o in outputs if isinstance(o, torch.Tensor) and o.is_cuda]


def stream_race_violations(
    outputs: list[torch.Tensor], snapshots: list[torch.Tensor]
) -> list[_checks.Violation]:
    cuda_outs = [o for o in outputs if isinstance(o, torch.Tensor) and o.is_cuda]
    for i, (out, snap) in enumerate(zip(cuda_outs, snapshots)):
        if not _equal_bytes(out, snap):
            changed = int((_bytes(out) != _bytes(snap)).sum())
            return [
                _checks.Violation(
                    _checks.STREAM_RACE,
                    f"output {i} changed after the current stream had "
                    f"finished ({changed} bytes): work on another stream or thread was not "
                    "joined before forward returned",
                    {"output": i, "bytes_changed": changed},
                )
            ]
    return []


_LIBRARIES: dict[str, tuple | None] = {}  # mapped path -> (cudaGetLastError, cudaGetErrorName) or None


def _runtimes() -> tuple:
    """Every distinct ``cudaGetLastError`` in the process: torch's libcudart, CuPy's, and static copies inside
    extension libraries that export it (nvcc links cudart statically by default). Libraries mapped since the
    last call are looked up; known ones are not opened again (a dlopen per mapped library per check cost
    ~10 ms per guarded call). ctypes never closes a handle, so a looked-up library stays mapped."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if "/" in line else ""
                if ".so" in path.rsplit("/", 1)[-1] and path not in paths:
                    paths.append(path)
    except OSError:
        return ()
    found, seen = [], set()
    for p in paths:
        if p not in _LIBRARIES:
            _LIBRARIES[p] = _lookup(p)
        entry = _LIBRARIES[p]
        if entry is None or entry[2] in seen:
            continue
        seen.add(entry[2])
        found.append(entry[:2])
    return tuple(found)


def _lookup(path: str) -> tuple | None:
    mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 1)
    try:
        lib = ctypes.CDLL(path, mode=mode)  # already mapped: no new library is loaded
        fn = lib.cudaGetLastError
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    name_fn = getattr(lib, "cudaGetErrorName", None)
    if name_fn is not None:
        name_fn.restype = ctypes.c_char_p
    return fn, name_fn, ctypes.cast(fn, ctypes.c_void_p).value


def clear_last_errors() -> None:
    for get_error, _ in _runtimes():
        get_error()


def launch_error_violations(device=None) -> list[_checks.Violation]:
    out = []
    try:
        torch.cuda.synchronize(device)
    except RuntimeError as exc:  # sticky: illegal address, misaligned access, trap...
        return [
            _checks.Violation(
                _checks.LAUNCH_ERROR, f"CUDA error at synchronisation: {str(exc)[:300]}", {"sticky": True}
            )
        ]
    for get_error, get_name in _runtimes():
        code = get_error()
        if code:
            try:
                name = get_name(code).decode() if get_name is not None else str(code)
            except Exception:  # noqa: BLE001 - the code alone is evidence enough
                name = str(code)
            out.append(
                _checks.Violation(
                    _checks.LAUNCH_ERROR,
                    f"a kernel launch failed and the error was ignored: {name}",
                    {"cuda_error": code, "name": name},
                )
            )
    return out
