"""Out-of-memory errors on the way to a verdict: which exceptions are one (``is_oom``), whether the
candidate's code raised it (``raised_in``), and ``OutOfMemory``, which carries that to the memory plan's rule
(``memory``: whose an out-of-memory is).

A leaf: the input generator, the memory plan and the run worker's failure handling all use it.
"""

from __future__ import annotations

from typing import Any

import torch

from ...guard._checks import GUARD_ERROR
from ...rules.policies import PolicyViolation


class OutOfMemory(Exception):
    """An out-of-memory error on the way to a verdict. ``in_candidate``: raised inside the candidate's own
    code; ``verdict``: what the candidate would get if the OOM is its own (``runtime_error``)."""

    def __init__(self, text: str, in_candidate: bool, verdict: Any = None):
        super().__init__(text)
        self.in_candidate = in_candidate
        self.verdict = verdict


def is_oom(exc: BaseException) -> bool:
    """Allocation failures of torch (CUDA and host) and of the guard, which reports its own as a failed
    check (it fails closed)."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    if isinstance(exc, PolicyViolation) and exc.check == GUARD_ERROR:
        return "OutOfMemoryError" in str(exc) or "out of memory" in str(exc)
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def raised_in(exc: BaseException, files: set[str]) -> bool:
    """Whether the exception passed through one of ``files`` (the candidate's sources)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in files:
            return True
        tb = tb.tb_next
    return False
