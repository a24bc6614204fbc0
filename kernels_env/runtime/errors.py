"""The sandbox's own failures, as its callers see them: the sandbox cannot work (``SandboxError``), the
reference is broken (``BrokenReference``), the judge failed on one request (``JudgeFailure``), and a worker
process failed while serving one (``WorkerFailure``: the candidate's verdict says why).
"""

from __future__ import annotations


class SandboxError(RuntimeError):
    """The sandbox itself cannot work (a worker never starts, ...): never the candidate's fault."""


class BrokenReference(SandboxError):
    """The reference (problem) cannot be loaded, run or timed: a user input error, not the candidate's fault.

    ``SandboxClient.baseline`` raises it; ``evaluate`` / ``submit`` never do: their verdict is then
    ``reference_error``. (A ``SandboxError`` subclass for callers written before that status existed.)"""


class JudgeFailure(SandboxError):
    """The judge failed on its own while serving one request (its exception, a malformed reply); the sandbox
    still works. ``baseline`` raises it; ``evaluate`` / ``submit`` turn it into a ``judge_error`` verdict."""


class WorkerFailure(Exception):
    def __init__(self, kind: str, detail: str, stage: str = "", log_tail: str = "", evidence=None):
        super().__init__(detail)
        self.kind = kind  # timeout | crash | memory | output | protocol | forgery
        self.detail = detail
        self.stage = stage
        self.log_tail = log_tail
        self.evidence = evidence or {}
