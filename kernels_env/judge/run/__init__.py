"""Stage 2, run: what a run worker does with one request, under the guard's reward-hack defences.

    harness        one request end to end: memory plan -> load -> trials -> families -> timing -> re-checks;
                   and a baselines request (the reference timed in each mode)
    request        the request as every step sees it (problem, candidate, settings, guard, memory plan)
    models         the reference and the candidate built with the same weights; their trial callables
    enforce        the defences of ``kernels_env.guard`` around every candidate call (docs/reward_hacks.md)
    verdict        failures as verdicts: the candidate's, the reference's, the judge's own
    families       the adversarial families run and reported one by one
    timed_checks   timing the candidate and the checks after its timed calls
    preflight      whether this machine can judge a problem at all (memory, before anything large exists)
    hygiene,       worker state restored between requests; where a request's seconds go
    phases

Imports ``judge.build``, ``judge.check``, ``judge.timing`` and ``judge.assemble``; nothing imports it but
the run worker (``kernels_env.runtime.worker``) and the tools.
"""

from .enforce import RequestGuard, start_worker
from .harness import evaluate, request_env
from .phases import PhaseClock
from .verdict import Verdict

__all__ = ["PhaseClock", "RequestGuard", "Verdict", "evaluate", "request_env", "start_worker"]
