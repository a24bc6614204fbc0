"""Every attack in the corpus is rejected for the right reason; every legitimate solution is judged correct.

Each case goes through the real sandbox, exactly as an RL rollout would: ``SandboxClient.submit`` (compile
stage in a child process, run worker under the guard, trials, adversarial families, timing where the case
needs it, re-checks), one client per device, all cases in flight at once. CPU cases (Triton interpreter) run
by default; ``device=cuda`` cases and the GPU re-run of every CPU legitimate solution (and of the attacks
whose mechanics differ there) are under the ``gpu`` marker; cases that compile a C++ extension on a CPU are
``slow``. The corpus is judged from a private copy, so an edit that slipped through could not touch it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from redteam_catalog import PROBLEMS, SOLUTIONS, Case, all_cases

from kernels_env.client import INFRA_ERROR, SandboxClient
from kernels_env.rules.config import JudgeConfig, SandboxConfig, TimingConfig
from kernels_env.rules.protocols import DEFAULT_FAMILIES

CASES = all_cases()
CPU_DEFAULT = [c for c in CASES if c.device == "cpu" and "slow" not in c.marks]
CPU_SLOW = [c for c in CASES if c.device == "cpu" and "slow" in c.marks]
CUDA_ONLY = [c for c in CASES if c.device == "cuda"]
# Every CPU-runnable legitimate solution must also hold on a real GPU, and so must the attacks whose
# mechanics differ there (caching allocator, real Triton/Inductor, CUDA kernels in the census, CUDA events).
GPU_RERUN_ATTACKS = {
    "attacks/background_thread",
    "attacks/custom_op_wraps_torch",
    "attacks/decoy_never_launched",
    "attacks/forge_reply_protocol_fd",
    "attacks/guard_and_profiler_detect_cache",
    "attacks/guard_detect_torch",
    "attacks/host_escape_numpy",
    "attacks/memory_reuse",
    "attacks/nn_layer",
    "attacks/patch_clock_while_timed",
    "attacks/replay_by_tensor_identity",
    "attacks/batch_and_skip",
    "attacks/geomean_collapse_empty_unwatched",
    "attacks/tf32_flip",
    "attacks/torch_compile",
}  # not uninitialized_scratch: GPU arithmetic canonicalises the NaN payload (a NaN mismatch there)
ON_GPU_TOO = [c for c in CPU_DEFAULT if c.legit or c.id in GPU_RERUN_ATTACKS]
# Classes that no solution file can exercise: their defences live in timing and reporting (test_speed.py).
NOT_A_SOLUTION_HACK = {16, 17}


# Short timing (the corpus checks verdicts, not speed): every timed-phase defence still runs.
TIMING = TimingConfig(warmup_iters=1, min_iters=5, max_iters=30, target_time_s=0.05, num_input_sets=2)


def judge_for(case: Case) -> JudgeConfig:
    return JudgeConfig(
        policy=case.policy,
        num_trials=2,
        time_candidate=case.legit or case.phase == "timing",
        baselines=["eager"],
        timing=TIMING,
        families=[*DEFAULT_FAMILIES, *case.families],
        # The race probe (compute-sanitizer racecheck) runs on its own cases (``probe=race``) only: the
        # corpus checks verdicts, and the probe costs a sanitizer run per verdict.
        race_check="always" if case.extra.get("probe") == "race" else "off",
    )


def solution_for(case: Case, root: Path) -> Path:
    """The case's file, or a workspace (``model_new.py`` + its helper modules) when it has helpers."""
    path = root / "solutions" / case.path
    if not case.helpers:
        return path
    workspace = root / "workspaces" / case.id.replace("/", "__")
    workspace.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, workspace / "model_new.py")
    for helper in case.helpers:
        shutil.copy(root / "solutions" / helper, workspace / helper)
    return workspace


def outcome(result: dict) -> str:
    """What the verdict says, in the corpus's ``expect`` vocabulary."""
    if result["status"] == "correct":
        return "accepted"
    if result["status"] == "incorrect":
        failed = (result.get("correctness") or {}).get("failed_family")
        return f"family:{failed}" if failed else "mismatch"
    return result.get("check") or result["status"]


def check_result(case: Case, result: dict, strict_families: bool = True) -> None:
    families = (result.get("correctness") or {}).get("families") or {}
    detail = (
        f"{case.id}: {result['status']} check={result['check']} error={result['error']} "
        f"evidence={json.dumps(result['evidence'], default=str)[:600]} "
        f"families={ {k: (f['status'], f['reason'][:80]) for k, f in families.items()} }"
    )
    assert result["judge"]["guard_enforced"] is True, detail
    got = outcome(result)
    if case.legit:
        assert got == "accepted", detail
        if strict_families:  # no false positives, not even in the families that are only reported
            assert not [k for k, f in families.items() if f["status"] in ("fail", "error")], detail
    else:
        assert got in case.expect.split("|"), detail  # "a|b": either reason, as the header explains


def _submit_all(client: SandboxClient, cases: list[Case], root: Path) -> dict[str, object]:
    return {
        c.id: client.submit(
            root / "problems" / f"{c.problem}.py",
            solution_for(c, root),
            judge_for(c),
            solution_name=Path(c.path).name if not c.helpers else None,
        )
        for c in cases
    }


def _config(device: str, cache: Path, **overrides) -> SandboxConfig:
    base = dict(
        device=device,
        cache_dir=str(cache),
        num_compile_workers=2,
        compile_timeout_s=240,
        run_timeout_s=120,
        memory_limit_gb=8.0,
        startup_timeout_s=240,
    )
    return SandboxConfig(**{**base, **overrides})


@pytest.fixture(scope="module")
def cpu_results(redteam_tree, tmp_path_factory):
    with SandboxClient(_config("cpu", tmp_path_factory.mktemp("redteam_cache"))) as client:
        futures = _submit_all(client, CPU_DEFAULT, redteam_tree)
        return {k: f.result() for k, f in futures.items()}


def test_corpus_is_complete():
    attacks = [c for c in CASES if not c.legit]
    legit = [c for c in CASES if c.legit]
    assert len(attacks) >= 18 and len(legit) >= 10, (len(attacks), len(legit))
    covered = {c.hack_class for c in attacks}
    assert set(range(1, 19)) - NOT_A_SOLUTION_HACK <= covered, sorted(set(range(1, 19)) - covered)
    styles = {c.style for c in legit}
    expected_styles = {"triton", "multi-kernel", "allowed-library-call", "in-place-safe", "fast-path"}
    assert expected_styles | {"load_inline", "cupy", "nvrtc"} <= styles, styles
    for c in CASES:
        assert os.path.exists(os.path.join(PROBLEMS, c.problem + ".py")), c
        assert c.policy in ("strict", "cuda_agent", "kernelbench"), c
        for helper in c.helpers:
            assert os.path.exists(os.path.join(SOLUTIONS, helper)), (c, helper)


@pytest.mark.parametrize("case", CPU_DEFAULT, ids=lambda c: c.id)
def test_cpu_case(case, cpu_results):
    check_result(case, cpu_results[case.id])


def test_edits_never_reached_the_files(cpu_results, redteam_tree):
    """The write attacks were blocked, not merely reported."""
    with (
        open(os.path.join(PROBLEMS, "relu.py")) as original,
        open(redteam_tree / "problems" / "relu.py") as copy,
    ):
        assert copy.read() == original.read()
    import kernels_env

    assert not os.path.exists(os.path.join(os.path.dirname(kernels_env.__file__), "redteam_pwned.py"))


def test_kernelbench_verdicts_list_the_pytorch_ops_that_ran(cpu_results):
    """``correctness.torch_ops``: the glue of a kernelbench solution by name and calls (no device time on a
    CPU); a solution without glue lists nothing."""
    ops = cpu_results["legit/kernelbench_glue_softmax"]["correctness"]["torch_ops"]
    assert {e["op"] for e in ops} == {"aten::amax", "aten::sub", "aten::sum", "aten::div"}, ops
    assert all(e["count"] == 1 and e["share"] is None for e in ops), ops
    glue = cpu_results["legit/kernelbench_glue_linear_cat"]["correctness"]["torch_ops"]
    cat = {e["op"]: e["count"] for e in glue}
    assert cat == {"aten::addmm": 1, "aten::cat": 1, "aten::clone": 2}, cat  # the no-op .to() is not listed
    assert cpu_results["legit/triton_relu"]["correctness"]["torch_ops"] == []


def test_an_output_in_another_memory_format_is_accepted_with_a_note(cpu_results):
    for case in ("legit/triton_relu_channels_last", "legit/kernelbench_channels_last_glue"):
        notes = [m["text"] for m in cpu_results[case]["messages"] if m["kind"] == "note"]
        assert any("strides (128, 1, 32, 8)" in n and "(128, 16, 4, 1)" in n for n in notes), (case, notes)
    plain = [m for m in cpu_results["legit/triton_relu"]["messages"] if "strides" in m.get("text", "")]
    assert plain == []


@pytest.mark.toolchain
def test_cpu_slow_cases(redteam_tree, tmp_path_factory):
    config = _config("cpu", tmp_path_factory.mktemp("redteam_slow_cache"), compile_timeout_s=900)
    with SandboxClient(config) as client:
        futures = _submit_all(client, CPU_SLOW, redteam_tree)
        for case in CPU_SLOW:
            check_result(case, futures[case.id].result())


@pytest.fixture(scope="module")
def gpu_client(tmp_path_factory):
    config = _config("cuda", tmp_path_factory.mktemp("redteam_gpu_cache"), num_compile_workers=6)
    with SandboxClient(config) as client:
        yield client


@pytest.fixture(scope="module")
def gpu_results(gpu_client, redteam_tree):
    # Extension builds first (the longest jobs, on the compile workers), then the rest; recorded as they land.
    cases = sorted(CUDA_ONLY, key=lambda c: "load_inline" not in c.id) + ON_GPU_TOO
    futures = _submit_all(gpu_client, cases, redteam_tree)
    ids = {f: case_id for case_id, f in futures.items()}
    results = {}
    for future in concurrent.futures.as_completed(futures.values()):
        try:
            results[ids[future]] = future.result()
        except Exception as exc:  # noqa: BLE001 - recorded per case; the test of that case fails
            results[ids[future]] = {"status": INFRA_ERROR, "error": f"{type(exc).__name__}: {exc}"}
        _record(cases, results)
    return results


def _record(cases: list[Case], results: dict) -> None:
    """The GPU verdicts so far, expected vs actual, for scripts/gpu_hacks.sh."""
    path = os.environ.get("HACKS_RESULTS_JSON")
    if not path:
        return
    rows = []
    for case in cases:
        res = results.get(case.id)
        if res is None:
            continue
        try:
            check_result(case, res, strict_families=False)
            ok = True
        except (AssertionError, KeyError, TypeError):
            ok = False
        correctness = res.get("correctness") or {}
        rows.append(
            {
                "case": case.id,
                "policy": case.policy,
                "expect": case.expect,
                "actual": outcome(res) if "check" in res else res["status"],
                "ok": ok,
                "status": res["status"],
                "check": res.get("check"),
                "error": res.get("error"),
                "evidence": res.get("evidence"),
                "families": correctness.get("families"),
                "census": correctness.get("census"),
                "timings": res.get("timings"),
                "durations_s": res.get("durations_s"),
            }
        )
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "total": len(cases)}
    with open(path, "w") as f:
        json.dump({**doc, "cases": rows}, f, indent=1, default=str)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CUDA_ONLY + ON_GPU_TOO, ids=lambda c: f"cuda-{c.id}")
def test_gpu_case(case, gpu_results):
    assert torch.cuda.is_available()
    check_result(case, gpu_results[case.id], strict_families=False)


@pytest.mark.gpu
def test_the_race_probe_ran_clean_on_the_barrier_twin(gpu_results):
    """``legit/shared_memory_barrier_cupy`` (the race's twin with ``__syncthreads``): racecheck ran and found
    nothing; the racy twin is rejected as ``shared_memory_race`` (its own case)."""
    probe = gpu_results["legit/shared_memory_barrier_cupy"].get("race_probe")
    assert probe is not None and probe["status"] == "ran" and probe["clean"] is True, probe
    racy = gpu_results["attacks/shared_memory_race_cupy"]
    if racy["status"] != "correct" and racy.get("check") != "shared_memory_race":
        return  # a trial caught the wrong answer first: no probe needed (its own case checks the verdict)
    assert racy["race_probe"]["hazards"] >= 1, racy.get("race_probe")


# 100 dependent elementwise steps in eager PyTorch: 100 kernel launches for what one kernel computes.
SLOW_REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        for _ in range(100):
            x = x * 0.999 + 0.001
        return x

def get_inputs():
    return [torch.rand(4096)]

def get_init_inputs():
    return []
"""

ONE_KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

DECAY = 0.999 ** 100  # x_100 = 1 + (x_0 - 1) * 0.999^100


@triton.jit
def closed_form(x_ptr, y_ptr, n, decay, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 1.0 + (x - 1.0) * decay, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        closed_form[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), DECAY, BLOCK=1024)
        return y
"""


@pytest.mark.gpu
def test_a_huge_legitimate_speedup_is_flagged_for_review(gpu_client, gpu_results):
    """Catalogue #16 and #17 through the real sandbox: a legitimate speedup beyond 10x is flagged for review
    in the verdict (not rejected), the roofline floor is reported, and candidate and baselines are timed the
    same way with a cold L2 (the default baselines also include max-autotune: tests/guard/test_speed.py)."""
    judge = JudgeConfig(baselines=["eager"], families=[], num_trials=2)
    res = gpu_client.evaluate(SLOW_REFERENCE, ONE_KERNEL, judge=judge, solution_name="closed_form.py")
    assert res["status"] == "correct", (res["error"], res["evidence"])
    timings = res["timings"]
    assert res["speedups"]["eager"] > 10, res["speedups"]
    assert timings["review"]["flagged"] == ["eager"], timings["review"]
    assert any(m["kind"] == "note" and "flagged for review" in m["text"] for m in res["messages"])
    assert timings["review"]["roofline_floor_ms"] > 0  # 32 KiB in and out: far below the measured time
    assert timings["candidate"]["median_ms"] > timings["review"]["roofline_floor_ms"]
    for stats in (timings["candidate"], timings["baselines"]["eager"]):  # one stream each: the stream clock
        assert stats["clock"] == "cuda_event_stream" and stats["side_stream_ms"] == 0.0, stats
        assert stats["l2_flush"] is True, stats
