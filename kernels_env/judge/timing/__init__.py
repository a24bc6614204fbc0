"""Used by stage 2 (``judge.run``), timing: the one timer of candidates and baselines, and its GPU.

    timer       CUDA events on rotated input sets with a cold L2 and whole-device synchronisation; the
                stopping rule (``stabilize``) and the sample statistics (``summarize``)
    gpu_share   the run worker's side of timing-exclusive GPU sharing (``kernels_env.host.gpu_lock``)
    baselines   eager / torch.compile / max-autotune timings of the reference, cached on disk

The checks around the candidate's timed calls are the run worker's (``judge.run.timed_checks``).
"""

from .baselines import baseline_key, cached_baselines, set_precision
from .timer import summarize, time_callable

__all__ = ["baseline_key", "cached_baselines", "set_precision", "summarize", "time_callable"]
