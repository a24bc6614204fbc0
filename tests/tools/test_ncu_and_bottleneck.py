"""ncu CSV parsing (documented layouts; real outputs once unpacked) and the bottleneck classifier."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest
from tools_fixtures import FIXTURES, PROBLEMS, REAL, needs_real

from kernels_env.tools import ToolContext, _profile
from kernels_env.tools._bottleneck import classify
from kernels_env.tools._context import CmdResult
from kernels_env.tools._ncu import (
    SECTIONS,
    SUMMARY_METRICS,
    find_ncu,
    kernel_metrics,
    ncu_command,
    parse_ncu_csv,
)
from kernels_env.tools._profile import aggregate, split_at_marker
from kernels_env.tools._render import render_profile

DOC = FIXTURES / "documented"


def test_wide_raw_page_units_and_separators():
    recs = parse_ncu_csv((DOC / "ncu_raw_wide.csv").read_text())
    assert [r["short_name"] for r in recs] == ["add_vec4", "fma_heavy", "tiny_kernel"]
    add = kernel_metrics(recs[0])
    assert add["duration_us"] == pytest.approx(197.44)  # usecond -> ns -> us
    assert add["dram_bytes"] == pytest.approx((536.87 + 268.44) * 1e6)  # Mbyte -> bytes
    assert add["dram_gbps"] == pytest.approx(805.31e6 / 197.44e-6 / 1e9, rel=1e-6)
    assert add["occupancy_limiter"] == "warps (block size)" and add["registers_per_thread"] == 22
    assert add["l2_hit_pct"] == pytest.approx(33.3) and add["waves_per_sm"] == pytest.approx(62.06)
    assert add["sm_count"] == 132
    fma = kernel_metrics(recs[1])
    assert fma["duration_us"] == pytest.approx(1510.3)  # "1,510.3": thousands separator
    assert fma["tensor_pct"] == 0.0


def test_long_details_page():
    (rec,) = parse_ncu_csv((DOC / "ncu_details_long.csv").read_text())
    k = kernel_metrics(rec)
    assert rec["short_name"] == "at::native::vectorized_elementwise_kernel<4>"
    assert k["duration_us"] == pytest.approx(290.0) and rec["metrics"][
        "dram__bytes_read.sum"
    ] == pytest.approx(1.07e9)
    assert k["dram_bytes"] is None  # write bytes not collected: no half-sum
    assert k["achieved_occupancy_pct"] == pytest.approx(80.2)


def test_no_csv_is_empty_not_a_crash():
    assert parse_ncu_csv("==PROF== Connected\n==ERROR== The application returned an error code (1).\n") == []


def test_labels_on_documented_sample():
    recs = parse_ncu_csv((DOC / "ncu_raw_wide.csv").read_text())
    labels = [classify(kernel_metrics(r))[0] for r in recs]
    assert labels == ["memory-bound", "compute-bound", "launch-bound"]


def _k(**kw):
    base = {
        "duration_us": 100.0,
        "dram_pct": None,
        "memory_pct": None,
        "sm_pct": None,
        "tensor_pct": None,
        "achieved_occupancy_pct": None,
        "theoretical_occupancy_pct": None,
        "occupancy_limiter": None,
        "grid_size": None,
        "sm_count": 132,
        "registers_per_thread": None,
        "l1_hit_pct": None,
        "l2_hit_pct": None,
        "dram_gbps": None,
        "waves_per_sm": None,
    }
    return {**base, **kw}


def test_classifier_memory_bound_with_evidence():
    label, ev = classify(_k(dram_pct=85.0, memory_pct=86.0, sm_pct=20.0, dram_gbps=4100.0))
    assert label == "memory-bound"
    assert "86%" in ev[0] and "20%" in ev[0] and "4100 GB/s" in ev[1]


def test_classifier_cache_bound_is_memory_bound_not_dram():
    label, ev = classify(_k(dram_pct=10.0, memory_pct=80.0, sm_pct=30.0, l1_hit_pct=90.0, l2_hit_pct=70.0))
    assert label == "memory-bound" and any("L1/L2" in e for e in ev)


def test_classifier_compute_bound_and_tensor_pipe():
    label, ev = classify(_k(dram_pct=5.0, memory_pct=12.0, sm_pct=40.0, tensor_pct=91.0))
    assert label == "compute-bound" and "91%" in ev[0] and "tensor pipe 91%" in ev[1]


def test_classifier_latency_occupancy_bound():
    label, ev = classify(
        _k(
            dram_pct=20.0,
            memory_pct=25.0,
            sm_pct=15.0,
            achieved_occupancy_pct=9.0,
            theoretical_occupancy_pct=12.5,
            occupancy_limiter="registers",
            grid_size=40.0,
            registers_per_thread=255.0,
        )
    )
    assert label == "latency/occupancy-bound"
    text = " ".join(ev)
    assert "limited by registers" in text and "40 blocks < 132 SMs" in text and "too few warps" in text


def test_classifier_launch_bound_and_unknown():
    assert classify(_k(duration_us=2.0, dram_pct=1.0, sm_pct=2.0))[0] == "launch-bound"
    assert classify(_k(duration_us=2.0, dram_pct=90.0, sm_pct=2.0))[0] == "memory-bound"  # short but busy
    assert classify(_k())[0] == "unknown"


def test_aggregate_shares_and_marker_split():
    recs = parse_ncu_csv((DOC / "ncu_raw_wide.csv").read_text())
    agg = aggregate(recs, iters=1)
    assert agg["kernels"][0]["short_name"] == "fma_heavy"  # sorted by time
    assert sum(k["share_pct"] for k in agg["kernels"]) == pytest.approx(100.0)
    assert agg["kernel_us_per_forward"] == pytest.approx(197.44 + 1510.3 + 2.08)
    marker = dict(recs[2], name="at::cuda::(anonymous namespace)::spin_kernel(long)")
    ref, cand, found = split_at_marker([recs[0], marker, recs[1]])
    assert (
        found
        and [r["short_name"] for r in ref] == ["add_vec4"]
        and [r["short_name"] for r in cand] == ["fma_heavy"]
    )
    assert split_at_marker(recs)[2] is False


def test_ncu_command_is_bounded_and_filtered():
    cmd = ncu_command("ncu", ["python", "t.py"], "/tmp/l.csv", launch_count=7, kernel_regex="add.*")
    s = " ".join(cmd)
    assert (
        "--clock-control none" in s and "--launch-count 7" in s and "--nvtx-include kernels_env_profile/" in s
    )
    assert "--kernel-name regex:add.*" in s and cmd[-2:] == ["python", "t.py"]
    assert "--apply-rules no" in s and "--page raw" in s and "--csv" in cmd
    # the summary's metrics by name, no section (nor set: ncu would add the default set's sections)
    assert cmd[cmd.index("--metrics") + 1] == ",".join(SUMMARY_METRICS)
    assert "--section" not in cmd and "--set" not in cmd and cmd.count("--metrics") == 1
    # the fallback: the sections, no explicit metrics
    fallback = ncu_command("ncu", ["x"], "l", sections=True, metrics=False)
    assert "--metrics" not in fallback and "--clock-control" in fallback
    assert [fallback[i + 1] for i, a in enumerate(fallback) if a == "--section"] == list(SECTIONS)
    both = ncu_command("ncu", ["x"], "l", sections=True)  # what scripts/gpu_profiler.sh captures to compare
    assert "--metrics" in both and both.count("--section") == len(SECTIONS)


def _collects(name: str) -> bool:
    """Whether ncu, given ``--metrics SUMMARY_METRICS``, reports the metric ``name``."""
    return any(
        re.search(m[len("regex:") :], name) if m.startswith("regex:") else m == name for m in SUMMARY_METRICS
    )


TENSOR_SAMPLE = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"


def _launch(drop: str | None = None) -> dict:
    """One launch with the collected metrics only (but ``drop``), each with its own value."""
    metrics = {}
    for i, name in enumerate(SUMMARY_METRICS):
        if name != drop:
            metrics[TENSOR_SAMPLE if name.startswith("regex:") else name] = 10.0 + i
    rec = {"id": 0, "name": "k", "short_name": "k", "block": None, "grid": None}
    return {**rec, "metrics": metrics, "units": {}}


def test_summary_metrics_are_what_the_summary_reads():
    """The pin: with only SUMMARY_METRICS collected, every field of the summary has its value and the text
    says no "n/a" (a field the parser, classifier or text reads but nobody collects fails here); and each
    collected metric is used (without it, the summary changes)."""
    assert _collects(TENSOR_SAMPLE) and len(set(SUMMARY_METRICS)) == len(SUMMARY_METRICS)
    full = kernel_metrics(_launch())
    missing = [field for field, value in full.items() if value is None or value == {}]
    assert missing == [], f"summary fields without a collected metric: {missing}"
    assert len(full["occupancy_block_limits"]) == 5
    text = render_profile({"mode": "ncu", "device": "x", "notes": [], "candidate": aggregate([_launch()], 1)})
    assert "n/a" not in text and "[" in text, text
    for name in SUMMARY_METRICS:
        assert kernel_metrics(_launch(drop=name)) != full, (
            f"{name} is collected but the summary never reads it"
        )


@needs_real
def test_summary_metrics_give_the_same_summary_as_the_sections_on_real_outputs():
    """Real H200 captures (sections + extra metrics): every collected name is one ncu reported there, and the
    launches cut down to what SUMMARY_METRICS collects give the same fields, labels and text."""
    for name in ("ncu_membound_with_eager.csv", "ncu_computebound.csv"):
        recs = parse_ncu_csv((REAL / name).read_text())
        columns = set(recs[0]["metrics"])
        for metric in SUMMARY_METRICS:
            if metric.startswith("regex:"):
                assert any(re.search(metric[len("regex:") :], c) for c in columns), (name, metric)
            else:
                assert metric in columns, (name, metric)
        cut = copy.deepcopy(recs)
        for r in cut:
            r["metrics"] = {k: v for k, v in r["metrics"].items() if _collects(k)}
            assert len(r["metrics"]) < len(recs[0]["metrics"]) / 10  # most of the sections' metrics unread
        assert [kernel_metrics(r) for r in cut] == [kernel_metrics(r) for r in recs], name
        assert [classify(kernel_metrics(r)) for r in cut] == [classify(kernel_metrics(r)) for r in recs]
        text = [render_profile({"mode": "ncu", "device": "H200", "notes": [], "candidate": aggregate(x, 1)})
                for x in (cut, recs)]  # fmt: skip
        assert text[0] == text[1]


@needs_real
def test_real_capture_of_the_summary_metrics_alone():
    """The profile tool's own ncu command on the GPU (scripts/gpu_profiler.sh, from the first capture after
    the switch to SUMMARY_METRICS): each launch has every field of the summary; the split and labels hold."""
    path = REAL / "ncu_summary_with_eager.csv"
    if not path.exists():
        pytest.skip("not captured yet: scripts/gpu_profiler.sh (PROFILER_STEPS=capture) captures it")
    ref, cand, found = split_at_marker(parse_ncu_csv(path.read_text(errors="replace")))
    assert found and ref and [r["short_name"] for r in cand] == ["add_vec4"]
    for r in ref + cand:
        k = kernel_metrics(r)
        assert [f for f, v in k.items() if v is None or v == {}] == [], r["name"]
        assert classify(k)[0] == "memory-bound", r["name"]


# the reference's profile, reused ------------------------------------------------------------------------
@pytest.fixture
def fake_ncu_runs(monkeypatch):
    """profile_tool in ncu mode without a GPU: each ncu run is recorded (its command and job) and answers
    with the documented launches: the reference's add_vec4, the marker, the candidate's fma_heavy."""
    monkeypatch.setattr(_profile, "_REFERENCE_PROFILES", {})
    monkeypatch.setattr(_profile, "_cuda", lambda: True)
    monkeypatch.setattr(_profile, "find_ncu", lambda: "/opt/ncu")
    monkeypatch.setattr(_profile, "_device_name", lambda cuda: "NVIDIA H200")
    add, fma, tiny = parse_ncu_csv((DOC / "ncu_raw_wide.csv").read_text())
    marker = dict(tiny, name="at::cuda::(anonymous namespace)::spin_kernel(long)")
    runs = []

    def launch_target(wrapper, target, log, timeout_s, prestart=True):
        which = target[target.index("--which") + 1]
        runs.append({"wrapper": list(wrapper), "which": which, "prestart": prestart})
        status = {"ok": True, "stages_s": {"forward": 0.1}}
        Path(target[target.index("--result") + 1]).write_text(json.dumps(status))
        return CmdResult(0, "", "", False, 0.5), which, True, (0.0, 0.5)

    records = {"both": [add, marker, fma], "candidate": [fma]}
    monkeypatch.setattr(_profile, "launch_target", launch_target)
    monkeypatch.setattr(_profile, "parse_ncu_csv", lambda which: copy.deepcopy(records[which]))
    return runs


def _profile_call(args: dict) -> dict:
    ctx = ToolContext()
    try:
        return _profile.profile_tool({"mode": "ncu", "roofline": False, **args}, ctx)
    finally:
        ctx.cleanup()


def test_a_later_profile_of_the_same_reference_profiles_the_candidate_alone(fake_ncu_runs, tmp_path):
    ref = tmp_path / "a" / "model.py"
    ref.parent.mkdir()
    shutil.copy(PROBLEMS / "ref_add.py", ref)
    args = {"reference": str(ref), "solution": str(PROBLEMS / "sol_fma_heavy.py")}
    first = _profile_call(args)
    # the next request materialises the same reference elsewhere: same contents, same profile
    again = tmp_path / "b" / "model.py"
    again.parent.mkdir()
    shutil.copy(ref, again)
    second = _profile_call({**args, "reference": str(again)})
    assert [r["which"] for r in fake_ncu_runs] == ["both", "candidate"]
    # the very same ncu command: the process pre-started after the first call serves the second
    assert fake_ncu_runs[0]["wrapper"] == fake_ncu_runs[1]["wrapper"]
    assert second["reference"].pop("reused") is True and "reused" not in first["reference"]
    assert render_profile(second) == render_profile(first)  # the same text
    assert first["reference"]["kernels"][0]["short_name"] == "add_vec4"
    assert second["candidate"]["kernels"][0]["short_name"] == "fma_heavy" and second["kernel_time_ratio"]
    # asked to measure it again, another reference, other settings: the reference is profiled
    _profile_call({**args, "reuse_reference": False})
    ref.write_text(ref.read_text() + "\n# another task\n")
    _profile_call(args)
    _profile_call({**args, "reference": str(again), "iters": 2})
    assert [r["which"] for r in fake_ncu_runs[2:]] == ["both", "both", "both"]
    _profile_call({**args, "reference": str(again)})  # each of those was remembered
    assert fake_ncu_runs[-1]["which"] == "candidate"


def test_the_reused_reference_keeps_the_ncu_command_with_a_kernel_filter(fake_ncu_runs):
    args = {"reference": str(PROBLEMS / "ref_add.py"), "solution": str(PROBLEMS / "sol_fma_heavy.py")}
    _profile_call({**args, "kernel_regex": "fma"})
    _profile_call({**args, "kernel_regex": "fma"})
    both, alone = fake_ncu_runs
    assert (both["which"], alone["which"]) == ("both", "candidate") and both["wrapper"] == alone["wrapper"]
    assert "regex:(?:fma)|spin_kernel" in both["wrapper"]
    _profile_call({**args, "include_reference": False})  # no reference: nothing to reuse, its own command
    alone = fake_ncu_runs[-1]["wrapper"]
    assert fake_ncu_runs[-1]["which"] == "candidate" and alone[alone.index("--launch-count") + 1] == "64"
    assert both["wrapper"][both["wrapper"].index("--launch-count") + 1] == "129"


def test_cuda_tools_are_found_by_override_path_and_toolkit(tmp_path, monkeypatch):
    """One lookup (kernels_env.host.cuda) for every CUDA program: override variable, PATH, toolkit, extras."""
    from kernels_env.host import cuda

    def program(folder, name):
        path = tmp_path / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return str(path)

    toolkit = tmp_path / "toolkit"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "include" / "cuda_runtime.h").write_text("")
    in_toolkit = program("toolkit/bin", "ncu")
    program("toolkit/bin", "nvcc")
    on_path = program("path", "ncu")
    override = program("elsewhere", "my-ncu")
    monkeypatch.setattr(cuda, "_roots", lambda: [str(toolkit)])
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("KERNELS_ENV_NCU", override)
    assert cuda.cuda_home() == str(toolkit)
    assert find_ncu() == override
    monkeypatch.setenv("KERNELS_ENV_NCU", str(tmp_path / "missing"))  # an override that does not exist
    assert find_ncu() == on_path
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_ncu() == in_toolkit
    assert cuda.find_cuda_tool("no-such-tool") is None
    extra = program("extra", "no-such-tool")
    assert cuda.find_cuda_tool("no-such-tool", extra=[extra]) == extra


@needs_real
def test_real_ncu_outputs_parse_and_label():
    """Every real capture parses, each launch has a duration and SM/DRAM throughput; the labels are right."""
    labels = {}
    for f in sorted(REAL.glob("ncu_*.csv")):
        recs = parse_ncu_csv(f.read_text(errors="replace"))
        assert recs, f"no kernel parsed from {f.name}"
        for r in recs:
            k = kernel_metrics(r)
            assert k["duration_us"] and k["duration_us"] > 0, (f.name, r["name"])
            assert k["sm_pct"] is not None and k["dram_pct"] is not None, (f.name, r["name"])
            assert k["achieved_occupancy_pct"] and k["occupancy_limiter"], (f.name, r["name"])
            labels[(f.stem, r["short_name"])] = classify(k)[0]
    summary = (REAL / "ncu_summary_with_eager.csv").exists()  # captured since the tool collects by name
    assert {f for f, _ in labels} == {
        "ncu_computebound",
        "ncu_details_membound",
        "ncu_membound_with_eager",
        "ncu_sections_only",
        *(["ncu_summary_with_eager"] if summary else []),
    }
    mem = [v for (f, n), v in labels.items() if n == "add_vec4"]
    assert len(mem) == 3 + summary and all(v == "memory-bound" for v in mem), labels
    assert labels[("ncu_computebound", "fma_heavy")] == "compute-bound", labels


@needs_real
def test_real_raw_page_metrics_and_the_reference_split():
    recs = parse_ncu_csv((REAL / "ncu_membound_with_eager.csv").read_text())
    ref, cand, found = split_at_marker(recs)
    assert found and [r["short_name"] for r in cand] == ["add_vec4"]
    assert [r["short_name"] for r in ref] == [
        "native::vectorized_elementwise_kernel<4, native::CUDAFunctor_add<float>, std::array<c, ...>"
    ]
    add = kernel_metrics(cand[0])
    # one pass over 3 x 256 MiB in ~181 us: ~4.3 TB/s of an H200's ~4.8; DRAM bytes within 5% of the 768 MiB
    # that must move (a few reads hit the 60 MB L2)
    assert 170 < add["duration_us"] < 200 and 80 < add["dram_pct"] < 100
    assert 3.9e3 < add["dram_gbps"] < 4.8e3 and add["dram_bytes"] == pytest.approx(3 * 2**28, rel=0.05)
    assert add["registers_per_thread"] == 22 and add["sm_count"] == 132 and add["tensor_pct"] == 0.0
    assert add["occupancy_limiter"] == "warps (block size)" and add["waves_per_sm"] == pytest.approx(
        62.06, 0.01
    )
    eager = aggregate(ref, iters=1)["kernels"][0]
    assert eager["bottleneck"] == "memory-bound" and eager["share_pct"] == pytest.approx(100.0)
    fma = kernel_metrics(parse_ncu_csv((REAL / "ncu_computebound.csv").read_text())[0])
    assert fma["sm_pct"] > 90 and fma["dram_pct"] < 5 and fma["achieved_occupancy_pct"] > 80


@needs_real
@pytest.mark.skipif(
    not (REAL / "README.md").exists(),  # scripts/gpu_profiler.sh also runs these tests on a fresh capture
    reason="exact values belong to the checked-in capture",
)
def test_real_details_page_labels_map_to_metric_names():
    (rec,) = parse_ncu_csv((REAL / "ncu_details_membound.csv").read_text())
    k = kernel_metrics(rec)
    assert rec["short_name"] == "add_vec4" and k["duration_us"] == pytest.approx(182.368)
    assert (k["dram_pct"], k["memory_pct"], k["sm_pct"]) == (89.8, 89.8, 13.5)
    assert (k["achieved_occupancy_pct"], k["theoretical_occupancy_pct"]) == (80.63, 100.0)
    assert k["occupancy_block_limits"] == {
        "registers": 10.0,
        "shared memory": 32.0,
        "warps (block size)": 8.0,
        "blocks per SM": 32.0,
        "barriers": 32.0,
    }
    assert classify(k)[0] == "memory-bound"


def test_a_torn_target_status_is_reported_as_unfinished_not_raised(fake_ncu_runs, tmp_path, monkeypatch):
    """A target killed while writing its JSON status leaves a torn file: the profile says the target did not
    finish (with ncu's log), it never raises out of the tool."""

    def torn(wrapper, target, log, timeout_s, prestart=True):
        Path(target[target.index("--result") + 1]).write_text('{"ok": tr')
        return CmdResult(0, "", "", False, 0.5), "both", True, (0.0, 0.5)  # the fixture: ncu recorded all

    monkeypatch.setattr(_profile, "launch_target", torn)
    ref = tmp_path / "model.py"
    shutil.copy(PROBLEMS / "ref_add.py", ref)
    out = _profile_call({"reference": str(ref), "solution": str(PROBLEMS / "sol_add_vec4.py")})
    assert "target did not finish" in out["error"]
