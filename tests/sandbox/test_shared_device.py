"""``SandboxConfig.run_workers_per_gpu`` > 1: N run workers (each with its standby) share each device. In CPU
mode: the fleet starts them all and each serves; a crash of one leaves the others serving; the memory plan
takes this worker's share of the device (and records it); timings taken while shared say so and their
baselines are cached apart; the roofline floor allows for a shared start-up copy; Ray refuses the option."""

from __future__ import annotations

import threading
import time
import types

import psutil
import pytest
import torch

from kernels_env.client import SandboxClient, SandboxError
from kernels_env.guard import GuardViolation
from kernels_env.judge.assemble import result as assemble
from kernels_env.judge.check import memory
from kernels_env.judge.check.memory import Footprint, GiB
from kernels_env.judge.run.enforce import RequestGuard
from kernels_env.judge.timing.baselines import baseline_key
from kernels_env.rules.config import JudgeConfig, SandboxConfig
from kernels_env.rules.protocols import JudgeSettings, resolve
from kernels_env.runtime import supervisor

from .conftest import FAST, RELU_PROBLEM, RELU_TRITON, cpu_config, relu_with, src


@pytest.fixture(scope="module")
def shared(cache_dir):
    """A CPU-mode client with two run workers on the CPU, each with its standby."""
    with SandboxClient(cpu_config(cache_dir, run_workers_per_gpu=2)) as sb:
        sb.start()
        yield sb


def _ready(worker: supervisor.Worker) -> bool:
    return worker.alive and worker.hello is not None


def test_n_run_workers_and_their_standbys_start_and_every_one_serves(shared):
    pool = shared._fleet.run
    assert [w.name for w in pool.workers] == ["run0.0", "run0.1"]
    standbys = pool.members[len(pool.workers) :]
    assert [w.name for w in standbys] == ["run0.0-standby", "run0.1-standby"]
    deadline = time.monotonic() + 240
    while not all(_ready(w) for w in standbys) and time.monotonic() < deadline:
        time.sleep(0.2)  # standbys start in the background
    assert all(_ready(w) for w in [*pool.workers, *standbys])
    assert len({w.proc.pid for w in [*pool.workers, *standbys]}) == 4
    before = {w.name: w.requests for w in pool.workers}
    futures = [shared.submit(src(RELU_PROBLEM), src(RELU_TRITON), FAST) for _ in range(4)]
    results = [f.result(timeout=300) for f in futures]
    assert [r["status"] for r in results] == ["correct"] * 4, [r["error"] for r in results]
    assert all(r["judge"]["device_shared_by"] == 2 for r in results)
    # idle workers are handed out in turn: each of the two served
    served = {w.name: w.requests - before[w.name] for w in pool.workers}
    assert all(n > 0 for n in served.values()), served


def test_a_crash_of_one_leaves_the_others_serving(cache_dir, monkeypatch):
    """No standbys, and the crashed worker's restart held back: the requests after the crash can only be
    served by the other worker, and must be (a pool that waited for the crashed one would hang here)."""
    gate = threading.Event()
    original = supervisor.Worker.start

    def start(worker, *args, **kwargs):
        if worker.hello is not None:  # started before: this is a restart
            gate.wait(120)
        return original(worker, *args, **kwargs)

    monkeypatch.setattr(supervisor.Worker, "start", start)
    config = cpu_config(cache_dir, run_workers_per_gpu=2, standby_run_workers=False)
    with SandboxClient(config) as sb:
        try:
            sb.start()
            pids = {w.name: w.proc.pid for w in sb._fleet.run.workers}
            crash = sb.evaluate(src(RELU_PROBLEM), relu_with("import os\nos.abort()"), FAST)
            assert crash["status"] == "runtime_error" and "SIGABRT" in crash["error"], crash["error"]
            after = [sb.submit(src(RELU_PROBLEM), src(RELU_TRITON), FAST) for _ in range(2)]
            assert [f.result(timeout=120)["status"] for f in after] == ["correct", "correct"]
            alive = [w for w in sb._fleet.run.workers if w.alive]
            assert len(alive) == 1 and alive[0].proc.pid == pids[alive[0].name]  # the survivor, as it was
        finally:
            gate.set()


def test_the_plan_takes_this_workers_share_and_records_it(shared):
    res = shared.evaluate(src(RELU_PROBLEM), src(RELU_TRITON), FAST)
    assert res["status"] == "correct", res["error"]
    mp = res["judge"]["memory_plan"]
    assert mp["shared_by"] == 2 and 0 < mp["share_bytes"] <= psutil.virtual_memory().total // 2
    assert mp["free_bytes"] <= mp["share_bytes"]
    assert mp["free_source"] == ("share" if mp["free_bytes"] == mp["share_bytes"] else "device")


def test_free_bytes_with_a_shared_cpu():
    cpu = torch.device("cpu")
    assert memory.free_bytes(cpu, None)[1:] == ("device", None)  # alone: as before
    free, source, share = memory.free_bytes(cpu, None, 4)
    assert 0 < share <= psutil.virtual_memory().total // 4 and free <= share
    assert source == ("share" if free == share else "device")
    free, source, _ = memory.free_bytes(cpu, 0.5, 4)
    assert (free, source) == (GiB // 2, "budget")


def test_free_bytes_with_a_shared_gpu(monkeypatch):
    """The GPU arithmetic, with the CUDA queries stood in: a 140 GiB device, 130 GiB free, this process
    holding 2 GiB of live tensors and 1 GiB cached: a quarter of the device less what it holds."""
    cuda = torch.device("cuda", 0)
    props = types.SimpleNamespace(total_memory=140 * GiB)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (130 * GiB, 140 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 2 * GiB)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 3 * GiB)
    assert memory.free_bytes(cuda, None) == (131 * GiB, "device", None)
    assert memory.free_bytes(cuda, None, 4) == (33 * GiB, "share", 33 * GiB)
    assert memory.free_bytes(cuda, 10, 4) == (10 * GiB, "budget", 33 * GiB)
    plan = memory.plan(Footprint(GiB, GiB), 33 * GiB, ("zeros",), 3, "cuda", "share", False, 4, 33 * GiB)
    d = plan.to_dict()
    assert (d["shared_by"], d["share_bytes"], d["free_source"]) == (4, 33 * GiB, "share")
    alone = memory.plan(Footprint(GiB, GiB), 131 * GiB, ("zeros",), 3).to_dict()
    assert (alone["shared_by"], alone["share_bytes"]) == (1, None)


def test_the_allocator_is_capped_at_the_share_only_on_a_shared_gpu(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, d: calls.append((f, d)))
    cuda = torch.device("cuda", 0)
    memory.cap_to_share(cuda, 1)
    memory.cap_to_share(torch.device("cpu"), 4)
    assert calls == []
    memory.cap_to_share(cuda, 4)
    assert calls == [(0.25, cuda)]


def test_timings_taken_on_a_shared_device_say_so(shared):
    timed = JudgeConfig(num_trials=1, families=[])
    res = shared.evaluate(src(RELU_PROBLEM), src(RELU_TRITON), timed)
    assert res["status"] == "correct", res["error"]
    assert res["timings"]["device_shared_by"] == 2
    notes = [m for m in res["messages"] if m.get("device_shared_by") == 2]
    assert len(notes) == 1 and notes[0]["kind"] == "note"
    assert "timed while 2 run workers shared the CPU" in notes[0]["text"]
    assert "run_workers_per_gpu=1" in notes[0]["text"]
    untimed = shared.evaluate(src(RELU_PROBLEM), src(RELU_TRITON), FAST)  # nothing timed: nothing to say
    assert untimed["timings"] is None and not any(m.get("device_shared_by") for m in untimed["messages"])
    alone = {"timings": {"candidate": {}}, "messages": []}
    assemble.note_shared_device(alone, resolve(JudgeConfig(), "cuda"))
    assert alone == {"timings": {"candidate": {}}, "messages": []}  # one worker per GPU: as before


def test_baselines_timed_on_a_shared_device_are_cached_apart():
    env = {"device": "cuda", "gpu": "H200", "driver": "580", "torch": "2.11", "cuda_runtime": "13.0"}

    def key(shared_by: int) -> dict:
        settings = JudgeSettings.from_dict(resolve(JudgeConfig(), "cuda", shared_by))
        return baseline_key("ref", [], [], env, "eager", settings)

    assert "device_shared_by" not in key(1)  # the default's keys are those of before
    assert key(2)["device_shared_by"] == 2 and key(2) != key(1) and key(2) != key(3)


def test_the_roofline_allows_for_a_start_up_copy_shared_with_the_others():
    """The peak bandwidth measured at a worker's start may have been shared with N workers: the floor
    scales it by N, so an honest candidate is never judged against a disturbed measurement; unless it was
    measured holding the GPU lock (exclusive timing), alone."""
    guard = types.SimpleNamespace(snap=types.SimpleNamespace(peak_bandwidth=1e9, bandwidth_alone=False))
    x = torch.empty(2**20, device="meta")  # 4 MiB in and 4 MiB out: a floor of 8.4 ms alone
    with pytest.raises(GuardViolation):
        RequestGuard.roofline(guard, 3.0, [x], x)
    shared = RequestGuard.roofline(guard, 3.0, [x], x, shared_by=4)
    assert shared["roofline_floor_ms"] == pytest.approx(8 * 2**20 / 4e9 * 1e3)
    assert shared["roofline_bandwidth_gbs"] == pytest.approx(4.0)
    guard.snap.bandwidth_alone = True
    with pytest.raises(GuardViolation):
        RequestGuard.roofline(guard, 3.0, [x], x, shared_by=4)


def test_bad_values_and_the_ray_backend_are_refused(cache_dir):
    with pytest.raises(ValueError, match="run_workers_per_gpu must be an integer >= 1, got 0"):
        SandboxClient(cpu_config(cache_dir, run_workers_per_gpu=0)).start()
    with pytest.raises(ValueError, match="run_workers_per_gpu must be >= 1"):
        resolve(JudgeConfig(), "cpu", 0)
    ray = SandboxClient(cpu_config(cache_dir, backend="ray", run_workers_per_gpu=2))
    with pytest.raises(SandboxError, match="run_workers_per_gpu=2 applies to backend=local only"):
        ray.start()  # refused before any Ray starts
    ray.close()


def test_requests_in_flight_cover_every_run_worker():
    assert SandboxConfig().default_in_flight() == 2 + 1 + 1  # the default: as before
    assert SandboxConfig(num_compile_workers=4, run_workers_per_gpu=6).default_in_flight() == 4 + 6 + 1
    assert SandboxConfig(num_gpu_workers=2, run_workers_per_gpu=3).default_in_flight() == 2 + 6 + 1
