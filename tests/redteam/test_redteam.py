"""Every attack in the corpus is rejected for the right reason; every legitimate solution is accepted.

Each solution runs through the standalone judge (``kernels_env.guard.evaluate_solution``) in its own child
process, on a private copy of the corpus. CPU cases run by default (Triton interpreter); ``device=cuda``
cases and the GPU re-run of every Triton solution are under the ``gpu`` marker; cases that compile a C++
extension are ``slow``.
"""

from __future__ import annotations

import os

import pytest
import torch
from redteam_catalog import PROBLEMS, Case, all_cases

from kernels_env.adversarial import DEFAULT_FAMILIES
from kernels_env.guard import evaluate_solutions

CASES = all_cases()
CPU_DEFAULT = [c for c in CASES if c.device == "cpu" and "slow" not in c.marks]
CPU_SLOW = [c for c in CASES if c.device == "cpu" and "slow" in c.marks]
CUDA_ONLY = [c for c in CASES if c.device == "cuda"]
# Every CPU-runnable legitimate solution must also hold on a real GPU, and so must the attacks whose
# mechanics differ there (caching allocator, real Triton/Inductor, CUDA kernels in the census).
GPU_RERUN_ATTACKS = {
    "attacks/background_thread",
    "attacks/custom_op_wraps_torch",
    "attacks/decoy_never_launched",
    "attacks/guard_and_profiler_detect_cache",
    "attacks/guard_detect_torch",
    "attacks/host_escape_numpy",
    "attacks/memory_reuse",
    "attacks/nn_layer",
    "attacks/tf32_flip",
    "attacks/torch_compile",
}  # not uninitialized_scratch: GPU arithmetic canonicalises the NaN payload (a NaN mismatch there)
ON_GPU_TOO = [c for c in CPU_DEFAULT if c.legit or c.id in GPU_RERUN_ATTACKS]
# Classes that no solution file can exercise: their defences live in timing and reporting (see docs).
NOT_A_SOLUTION_HACK = {16, 17}
FAST = {"trials": 2, "timed_calls": 2}


def _job(case: Case, root, device: str | None = None) -> tuple:
    problem = os.path.join(root, "problems", case.problem + ".py")
    solution = os.path.join(root, "solutions", case.path)
    options = {**FAST, "device": device or case.device, "families": (*DEFAULT_FAMILIES, *case.families)}
    return problem, solution, case.policy, options


def check_verdict(case: Case, verdict) -> None:
    families = {f["family"]: f for f in verdict.families}
    detail = f"{case.id}: {verdict.status} {verdict.check} {verdict.message} | families={families}"
    if case.legit:
        assert verdict.status == "accepted", detail
        bad = {k: f for k, f in families.items() if f["status"] in ("fail", "error")}
        assert not bad, detail
    elif case.expect.startswith("family_fail:"):
        family = case.expect.split(":", 1)[1]
        assert verdict.status == "accepted", detail  # no hack check fires: only the family exposes it
        assert families[family]["status"] == "fail", detail
    else:
        assert verdict.status in ("rejected", "incorrect"), detail
        assert verdict.check in case.expect.split("|"), detail  # "a|b": either reason, as the header explains


@pytest.fixture(scope="session")
def cpu_verdicts(redteam_tree):
    jobs = [_job(c, redteam_tree) for c in CPU_DEFAULT]
    verdicts = evaluate_solutions(jobs, max_parallel=2, timeout_s=300)
    return {c.id: v for c, v in zip(CPU_DEFAULT, verdicts)}


def test_corpus_is_complete():
    attacks = [c for c in CASES if not c.legit]
    legit = [c for c in CASES if c.legit]
    assert len(attacks) >= 18 and len(legit) >= 10, (len(attacks), len(legit))
    covered = {c.hack_class for c in attacks}
    assert set(range(1, 19)) - NOT_A_SOLUTION_HACK <= covered, sorted(set(range(1, 19)) - covered)
    styles = {c.style for c in legit}
    assert {"triton", "multi-kernel", "allowed-library-call", "in-place-safe"} <= styles, styles
    for c in CASES:
        assert os.path.exists(os.path.join(PROBLEMS, c.problem + ".py")), c
        assert c.policy in ("strict", "cuda_agent", "kernelbench"), c


@pytest.mark.parametrize("case", CPU_DEFAULT, ids=lambda c: c.id)
def test_cpu_case(case, cpu_verdicts):
    check_verdict(case, cpu_verdicts[case.id])


def test_edits_never_reached_the_files(cpu_verdicts, redteam_tree):
    """The write attacks were blocked, not merely reported."""
    with (
        open(os.path.join(PROBLEMS, "relu.py")) as original,
        open(redteam_tree / "problems" / "relu.py") as copy,
    ):
        assert copy.read() == original.read()
    import kernels_env

    assert not os.path.exists(os.path.join(os.path.dirname(kernels_env.__file__), "redteam_pwned.py"))


@pytest.mark.slow
@pytest.mark.parametrize("case", CPU_SLOW, ids=lambda c: c.id)
def test_cpu_slow_case(case, redteam_tree):
    verdict = evaluate_solutions([_job(case, redteam_tree)], max_parallel=1, timeout_s=900)[0]
    check_verdict(case, verdict)


@pytest.fixture(scope="session")
def gpu_verdicts(redteam_tree):
    # Extension builds first (the longest jobs), then the rest; results are written as they arrive.
    cases = sorted(CUDA_ONLY, key=lambda c: "load_inline" not in c.id) + ON_GPU_TOO
    jobs = [_job(c, redteam_tree, device="cuda") for c in cases]
    done: dict = {}

    def arrived(i, verdict):
        done[i] = verdict
        _record([cases[k] for k in sorted(done)], [done[k] for k in sorted(done)], total=len(cases))

    verdicts = evaluate_solutions(jobs, max_parallel=3, timeout_s=240, on_result=arrived)
    return {("cuda", c.id): v for c, v in zip(cases, verdicts)}


def _record(cases, verdicts, total: int) -> None:
    """Write the GPU verdicts so far (and whether each matched its expectation) for scripts/gpu_hacks.sh."""
    path = os.environ.get("HACKS_RESULTS_JSON")
    if not path:
        return
    import json

    rows = []
    for case, verdict in zip(cases, verdicts):
        try:
            check_verdict(case, verdict)
            ok = True
        except AssertionError:
            ok = False
        rows.append(
            {"case": case.id, "expect": case.expect, "policy": case.policy, "ok": ok, **verdict.to_dict()}
        )
    with open(path, "w") as f:
        json.dump(
            {
                "device": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "total": total,
                "cases": rows,
            },
            f,
            indent=1,
            default=str,
        )


@pytest.mark.gpu
@pytest.mark.parametrize("case", CUDA_ONLY + ON_GPU_TOO, ids=lambda c: f"cuda-{c.id}")
def test_gpu_case(case, gpu_verdicts):
    assert torch.cuda.is_available()
    check_verdict(case, gpu_verdicts[("cuda", case.id)])
