"""Killing a sandbox process together with everything it started.

A worker or a forked compile/tool child runs compilers and profilers (nvcc, ncu, compute-sanitizer) that the
tools start in their own sessions so they can be killed as a group on their own deadline; killing only the
worker's process group would leave those running. ``kill_tree`` kills every descendant, then the group.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil


def kill_tree(pid: int) -> None:
    """SIGKILL every descendant of ``pid`` (whatever its session), then ``pid``'s process group."""
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    for proc in descendants:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# Sessions of the sandbox's own long-lived helpers (a pre-started profiling process and what its profiler
# started, ``kernels_env.tools._prestart``): never a candidate's leftovers. A candidate cannot join one (a
# session is only ever created by its leader's ``setsid``), and the id of a live leader cannot be reused.
OWN_SESSIONS: set[int] = set()


def in_own_session(pid: int) -> bool:
    try:
        return os.getsid(pid) in OWN_SESSIONS
    except (ProcessLookupError, PermissionError):
        return False
