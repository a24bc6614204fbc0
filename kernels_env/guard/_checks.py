"""Check names, the violation record and the exception that carries it.

Every defence reports under one stable check name (the strings below); the verdict of a rejected candidate
names the first violation and its evidence. Names are part of the protocol: tests assert them, the judge
reports them, so they never change meaning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..rules.policies import PolicyViolation

# Dispatch-level interception (catalogue #1, #2, #14).
FORBIDDEN_OP = "forbidden_op"  # PyTorch compute the policy does not allow
REFERENCE_MODEL_CALLED = "reference_model_called"  # the reference Model (or its code) ran inside ModelNew
REFERENCE_PASSTHROUGH = "reference_passthrough"  # ModelNew runs an inherited copy of Model's forward
HOST_ESCAPE = "host_escape"  # tensor data pulled to Python/NumPy (numpy(), tolist(), item())
GUARD_BYPASS = "guard_bypass"  # interception disabled or popped; compute seen only by the profiler
SWALLOWED_EXCEPTION = "swallowed_exception"  # an exception crossed candidate code and was caught there
# Kernel census (catalogue #3).
NO_CUSTOM_KERNEL = "no_custom_kernel"  # no custom kernel launch during forward
LIBRARY_KERNEL = "library_kernel"  # library/torch kernel the policy does not allow (not via a torch op)
HOST_ROUNDTRIP = "host_roundtrip"  # device-to-host copy during forward (work done on the host)
LOW_CUSTOM_WORK = "low_custom_work"  # custom kernels did a negligible share of the device time
# Memory (catalogue #4, #13).
POISONED_OUTPUT = "poisoned_output"  # output still holds the poison pattern: never written
# Inputs (catalogue #6) and judge state (#9, #10, #14, #15).
INPUT_MUTATION = "input_mutation"
REFERENCE_TAMPERED = "reference_tampered"  # reference weights/buffers changed while the candidate ran
JUDGE_TAMPERED = "judge_tampered"  # timer/checker/torch functions replaced or their code swapped
PRECISION_STATE = "precision_state"  # TF32 / reduced-precision / determinism flags flipped
GLOBAL_STATE = "global_state"  # other torch global state changed (default dtype, grad mode, ...)
INTROSPECTION = "introspection"  # frame/gc/memory introspection from candidate code
VERIFIER_WRITE = "verifier_write"  # candidate wrote or removed a protected (judge/problem) file
SUBPROCESS = "subprocess"  # a process spawned during forward (work outside the judged process)
PROTOCOL_FORGERY = "protocol_forgery"  # candidate code reached the judge's reply channel (forged verdict)
# Concurrency (catalogue #7).
BACKGROUND_THREAD = "background_thread"
STREAM_RACE = "stream_race"  # output still changing after the current stream finished
# Outputs (catalogue #8, #10, #12).
OUTPUT_TYPE = "output_type"  # not a plain torch.Tensor (subclass, forged object, wrong structure)
OUTPUT_STORAGE = "output_storage"  # meta/fake/lazy tensor without real data
OUTPUT_DEVICE = "output_device"
OUTPUT_DTYPE = "output_dtype"
OUTPUT_SHAPE = "output_shape"
OUTPUT_STRIDES = "output_strides"  # overlapping or expanded memory (any non-overlapping layout is fine)
OUTPUT_ALIASES_INPUT = "output_aliases_input"
OUTPUT_REUSED = "output_reused"  # two calls returned the same storage: an earlier answer was overwritten
CONSTANT_OUTPUT = "constant_output"
# Correctness-related (catalogue #5, #11, #13, #18).
MISMATCH = "mismatch"
RECHECK_MISMATCH = "recheck_mismatch"  # wrong after the timing loop (caching/stale results)
NONDETERMINISTIC = "nondeterministic"
LAUNCH_ERROR = "launch_error"
BELOW_ROOFLINE = "below_roofline"  # timed faster than moving the data at peak bandwidth allows
GUARD_ERROR = "guard_error"  # the guard itself failed: fail closed

ALL_CHECKS = tuple(
    v for k, v in sorted(globals().items()) if k.isupper() and isinstance(v, str) and k != "ALL_CHECKS"
)


@dataclass(frozen=True)
class Violation:
    """One failed check: its name, a one-line message and structured evidence (JSON-serialisable)."""

    check: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = self.evidence.get("frame")
        return f"{self.check}: {self.message}" + (f" [at {where}]" if where else "")


class GuardViolation(PolicyViolation):
    """Raised when a guarded run broke a rule; ``violation`` is the first, ``violations`` all of them.

    It is the judge's ``PolicyViolation`` (``check``, ``evidence``): the verdict becomes ``rejected``. A
    candidate may catch it inside its forward; the guard still remembers it and raises again on exit.
    """

    def __init__(self, violations: list[Violation] | Violation):
        vs = [violations] if isinstance(violations, Violation) else list(violations)
        if not vs:
            raise ValueError("GuardViolation needs at least one violation")
        self.violations = vs
        self.violation = vs[0]
        evidence = {**vs[0].evidence, "message": vs[0].message}
        if len(vs) > 1:
            evidence["other_checks"] = [v.check for v in vs[1:]][:10]
        super().__init__(vs[0].check, evidence, str(vs[0]))
