"""The verdict vocabulary: every status a result may have, the groups that rewards and summaries read, and
the stages of the judge. A leaf: ``result`` (the schema) and ``rewards`` (functions of a status) both read it.
"""

from __future__ import annotations

__all__ = [
    "CORRECT",
    "INCORRECT",
    "COMPILE_ERROR",
    "RUNTIME_ERROR",
    "TIMEOUT",
    "REJECTED",
    "NOT_RUN",
    "JUDGE_ERROR",
    "REFERENCE_ERROR",
    "INSUFFICIENT_MEMORY",
    "TOOLCHAIN_MISSING",
    "MACHINE_LIMITS",
    "NO_SOLUTION",
    "INFRA_ERROR",
    "OUTSIDE",
    "NO_VERDICT",
    "FAILURES",
    "STATUSES",
    "JUDGE_STATUSES",
    "STAGES",
]

CORRECT = "correct"
INCORRECT = "incorrect"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
REJECTED = "rejected"  # a policy check failed (``check`` names it, ``evidence`` says why)
NOT_RUN = "not_run"  # CPU mode: a CUDA solution compiled but cannot run here (reward null)
# Verdicts that are not the candidate's doing: no reward, counted apart from the candidate's failures.
JUDGE_ERROR = "judge_error"  # the judge itself failed (its own exception, its own out-of-memory): a traceback
REFERENCE_ERROR = "reference_error"  # the reference problem cannot be loaded or run
# This machine cannot judge the request (issue 31): the problem needs more memory than the host (CPU mode) or
# the device has free, estimated before anything ran; the solution's backend (CuTe DSL, TileLang,
# ThunderKittens) has no toolchain installed here, named in the error.
INSUFFICIENT_MEMORY = "insufficient_memory"
TOOLCHAIN_MISSING = "toolchain_missing"
MACHINE_LIMITS = (INSUFFICIENT_MEMORY, TOOLCHAIN_MISSING)
# Verdicts made outside the judge (``Result.outside``: the agent loop, RL rollouts, evaluation reports), so
# that every verdict anywhere has this schema and one vocabulary. The judge never gives them, and a stage's
# report that claims one is the judge's failure (``JUDGE_STATUSES``).
NO_SOLUTION = "no_solution"  # nothing judgeable was left (no model_new.py, an action that made no candidate)
INFRA_ERROR = "infra_error"  # the sandbox could not be reached, did not answer or its wait ran out
OUTSIDE = (NO_SOLUTION, INFRA_ERROR)
# Statuses without a reward (not the candidate's doing).
NO_VERDICT = (NOT_RUN, JUDGE_ERROR, REFERENCE_ERROR, *MACHINE_LIMITS, INFRA_ERROR)
FAILURES = (INCORRECT, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, REJECTED, NO_SOLUTION)  # the failure reward
STATUSES = (CORRECT, *FAILURES, *NO_VERDICT)
JUDGE_STATUSES = tuple(s for s in STATUSES if s not in OUTSIDE)

STAGES = ("compile", "load", "correctness", "timing", "done")
