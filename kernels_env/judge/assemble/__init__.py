"""Stage 3, assemble: the final verdict, on the caller's side, from what the stages reported.

    replies      each stage's reply read without trusting it: the compile report screened, the run
                 worker's reply and its failures, the baselines' reply, the GPU-lock seconds
    result       status, speedups over each baseline, the speed review, the reward; the verdicts of stages
                 whose worker died, hung or forged (``judge_error``, ``reference_error``, ``forged``)
    race_probe   compute-sanitizer racecheck on a correct GPU verdict: when, and what a hazard changes

Pure functions over dicts (no worker, no torch): the client (``kernels_env.client``) calls them.
"""

from . import race_probe, result
from .result import judge_error, reference_error, verdict

__all__ = ["judge_error", "race_probe", "reference_error", "result", "verdict"]
