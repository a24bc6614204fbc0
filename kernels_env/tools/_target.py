"""The process that ncu / compute-sanitizer launch (and the cheap profile on a GPU): build the models, warm
up, run the measured forwards.

``python -m kernels_env.tools._target --reference R --solution S --which candidate|reference|both
--mode range|once|events [--warmup N] [--iters N] --result FILE``. The reference and the candidate are
loaded by the sandbox's loader and fed the harness's inputs (``_candidate``). In ``range`` mode the measured
forwards run inside the NVTX push/pop range the profiler filters on, after a device synchronisation, so
warm-up, JIT and autotuning launches are never profiled; a marker kernel between the reference's and the
candidate's launches splits the profile. ``events`` mode runs the cheap profile (``_events``) of each model.
It writes a JSON status to ``--result`` (its stdout belongs to the candidate).
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()  # before the imports below: torch's import is part of what a profile costs

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

from ._candidate import (  # noqa: E402
    CandidateError,
    build_model,
    load_candidate,
    load_reference,
    resolve_candidate,
    task_inputs,
)
from ._ncu import MARKER_CYCLES, NVTX_RANGE  # noqa: E402


class _Status(dict):
    """The JSON status; setting ``stage`` also records how long the previous stage took (``stages_s``)."""

    def __init__(self) -> None:
        super().__init__(ok=False, stage="import", stages_s={})
        self._since = _STARTED

    def __setitem__(self, key, value) -> None:
        if key == "stage":
            now = time.perf_counter()
            self["stages_s"][self["stage"]] = round(now - self._since, 4)
            self._since = now
        super().__setitem__(key, value)

    def update(self, *args, **kwargs) -> None:
        for k, v in dict(*args, **kwargs).items():
            self[k] = v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", required=True)
    ap.add_argument("--solution")
    ap.add_argument("--which", choices=("candidate", "reference", "both"), default="candidate")
    ap.add_argument("--mode", choices=("range", "once", "events"), default="range")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--result", required=True)
    a = ap.parse_args(argv)
    status = _Status()
    try:
        import torch

        status["stage"] = "load"
        problem = load_reference(a.reference)
        runs = []  # (label, model class) in profiling order: reference first, then the candidate
        if a.which in ("reference", "both"):
            runs.append(("reference", problem.Model))
        if a.which in ("candidate", "both"):
            runs.append(("candidate", load_candidate(resolve_candidate(a.solution))[1]))
        status["stage"] = "build"
        built = [
            (label, build_model(problem, cls, a.device), task_inputs(problem, a.device))
            for label, cls in runs
        ]
        if a.mode == "events":  # the cheap profile (PyTorch profiler) of each model, in this fresh process
            from ._events import profile_forward

            status["stage"] = "forward"
            status["events"] = {
                label: profile_forward(model, inputs, device=a.device, warmup=a.warmup, iters=a.iters)
                for label, model, inputs in built
            }
        else:
            _forwards(torch, built, a, status)
        status.update(ok=True, stage="done")
    except CandidateError as e:
        status["error"] = str(e)
        status["diagnostic"] = e.diagnostic
    except BaseException as e:  # noqa: BLE001 - report everything, including SystemExit from the candidate
        status["error"] = f"{type(e).__name__}: {e}"[:2000]
        status["traceback"] = traceback.format_exc()[-4000:]
    with open(a.result, "w") as f:
        json.dump(status, f)
    return 0 if status["ok"] else 1


def _forwards(torch, built: list, a: argparse.Namespace, status: dict) -> None:
    """Warm-up, then the measured forwards (in ``range`` mode inside the NVTX range, split by a marker)."""
    status["stage"] = "warmup"
    with torch.no_grad():
        for _label, model, inputs in built:
            for _ in range(a.warmup if a.mode == "range" else 0):
                model(*inputs)
        _sync(torch, a.device)
        status["stage"] = "forward"
        if a.mode == "range":
            torch.cuda.nvtx.range_push(NVTX_RANGE)
        for i, (label, model, inputs) in enumerate(built):
            if i and a.mode == "range":
                torch.cuda._sleep(MARKER_CYCLES)
            t0 = time.perf_counter()
            for _ in range(a.iters):
                model(*inputs)
            _sync(torch, a.device)
            status[f"{label}_forward_s"] = time.perf_counter() - t0
        if a.mode == "range":
            torch.cuda.nvtx.range_pop()


def _sync(torch, device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
