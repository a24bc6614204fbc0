"""The process that ncu / compute-sanitizer launch (and the cheap profile on a GPU): build the models, warm
up, run the measured forwards.

``python -m kernels_env.tools._target --reference R --solution S --which candidate|reference|both
--mode range|once|events [--warmup N] [--iters N] --result FILE``. The reference and the candidate are
loaded by the sandbox's loader and fed the harness's inputs (``_candidate``). In ``range`` mode the measured
forwards run inside the NVTX push/pop range the profiler filters on, after a device synchronisation, so
warm-up, JIT and autotuning launches are never profiled; a marker kernel between the reference's and the
candidate's launches splits the profile. ``events`` mode runs the cheap profile (``_events``) of each model.
It writes a JSON status to ``--result`` (its stdout belongs to the candidate).

``--job FIFO --ack FILE`` (a pre-started target, ``_prestart``): import and create the CUDA context, then
block on the FIFO before any kernel launch; the job line carries the arguments above and the late
environment; FILE gets the job's id.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()  # before the imports below: torch's import is part of what a profile costs
_PRESTART_S: dict = {}

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
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
from ._events import profile_forward  # noqa: E402
from ._ncu import MARKER_CYCLES, NVTX_RANGE  # noqa: E402


class _Status(dict):
    """The JSON status; setting ``stage`` also records how long the previous stage took (``stages_s``)."""

    def __init__(self) -> None:
        super().__init__(ok=False, stage="import", stages_s={}, pid=os.getpid())
        if _PRESTART_S:  # a pre-started target: its import and wait happened before the job
            self["prestart_s"] = _PRESTART_S
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
    status["result_at"] = time.monotonic()  # with the owner's clock: the process's exit tail after this
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


def _warm_cuda(torch) -> None:
    """Create the CUDA context now, while no job waits: under ncu its set-up (the profiler's injection
    initialises per context) cost a job 0.2-0.5 s. An allocation, no kernel: and a profiler that launched
    this process records only launches inside the job's NVTX range anyway. No GPU: nothing to do."""
    with contextlib.suppress(Exception):
        if torch.cuda.is_available():
            torch.empty(1, device="cuda")


def serve_job(job_fifo: str, ack: str) -> int:
    """A pre-started target: pay the imports and the CUDA context a job needs, then wait for the job (no
    kernel runs before it, so a profiler that launched this process records nothing until the job's NVTX
    range)."""
    global _STARTED
    import torch

    # As the run worker does: most candidates import these (cpp_extension: every load_inline solution;
    # fastpath: every nvrtc_kernel one).
    for optional in ("triton", "numpy", "torch.utils.cpp_extension", "kernels_env.fastpath"):
        with contextlib.suppress(Exception):
            __import__(optional)
    _warm_cuda(torch)
    imported = time.perf_counter()
    # Non-blocking open: the owner opened its end first; if it has died since, the read sees EOF at once.
    fd = os.open(job_fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as f:  # closed before the candidate runs
        line = f.readline()
    if not line.endswith(b"\n"):  # the owner went away without a job: nobody else removes its folder
        shutil.rmtree(os.path.dirname(job_fifo), ignore_errors=True)
        return 0
    job = json.loads(line)
    with open(ack, "w") as f:
        f.write(job["id"])
    for key, value in job["env"].items():  # per request (the solution's extension dir): set now, as cold
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    now = time.perf_counter()
    _PRESTART_S.update(
        import_s=round(imported - _STARTED, 4), wait_s=round(now - imported, 4), job_at=time.monotonic()
    )
    _STARTED = now  # the job's stages from here: the wait is not its import
    return main(job["argv"])


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--job" and sys.argv[3] == "--ack":
        sys.exit(serve_job(sys.argv[2], sys.argv[4]))
    sys.exit(main())
