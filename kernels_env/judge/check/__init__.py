"""Used by stage 2 (``judge.run``), check: what correctness is made of.

    inputs, adversarial   inputs for trials and timing from seeds the candidate cannot predict; the
                          adversarial input families (NaN/Inf, denormals, large, zeros, shapes, ...)
    compare, conditioning output comparison (structure, dtype, values; NaN-aware ``allclose``); a family's
                          tolerance widened where float32 itself cannot meet it
    memory, oom           each request's memory plan from the reference's footprint; which errors are
                          out-of-memory errors and whose

No module here runs candidate code or knows the guard's request state: ``judge.run`` does.
"""

from . import adversarial  # noqa: F401 - registers the adversarial input families with ``inputs``
from .compare import compare, max_errors
from .inputs import FAMILIES, clone, fresh_seed, make_inputs, nbytes, problem_module
from .memory import Footprint, MemoryPlan, plan
from .oom import OutOfMemory, is_oom

__all__ = [
    "FAMILIES",
    "Footprint",
    "MemoryPlan",
    "OutOfMemory",
    "clone",
    "compare",
    "fresh_seed",
    "is_oom",
    "make_inputs",
    "max_errors",
    "nbytes",
    "plan",
    "problem_module",
]
