"""The Ray backend (``SandboxConfig(backend="ray")``) on a local Ray cluster in CPU mode: the same verdicts as
the local pool, an actor killed mid-request, a worker killed inside its actor, and the node-path mapping.

Ray is started once for the module with a small footprint (2 CPUs, 100 MiB object store); where it cannot
start, the module is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernels_env.client import SandboxClient
from kernels_env.rules.messages import CompileRequest, Source

from .conftest import FAST, RELU_PROBLEM, RELU_TRITON, cpu_config, relu_with, src

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# One solution per verdict CPU mode can give a Triton/PyTorch candidate (CUDA ones are 'not_run' here).
BATCH = [
    ("1_relu", "1_relu__triton.py"),  # correct
    ("2_softmax", "2_softmax__wrong_mask.py"),  # incorrect
    ("5_sum_reduction", "5_sum_reduction__crash.py"),  # runtime_error
    ("4_layernorm", "4_layernorm__torch.py"),  # rejected (plain PyTorch)
    ("4_layernorm", "4_layernorm__syntax_error.py"),  # compile_error
]


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="the ray package is not installed (requirements.txt pins it)")
    before = set(_children())
    try:
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20, namespace="tests")
    except Exception as exc:
        pytest.skip(f"a local Ray cluster cannot start in this environment: {exc}")
    yield ray
    ray.shutdown()
    _reap_ray_processes(before)


def _children() -> dict:
    import psutil

    return {p.pid: p for p in psutil.Process().children(recursive=True)}


def _reap_ray_processes(before: set[int], timeout_s: float = 20.0) -> None:
    """``ray.shutdown`` returns before the cluster's processes have exited, and a few more can be started on
    the way down; left alone they live on into later tests (the soak test counts every process alive after
    its client as a leak). Wait for them, then kill what is left."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while (left := {pid: p for pid, p in _children().items() if pid not in before}) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.25)
    for proc in left.values():
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(list(left.values()), timeout=5)


@pytest.fixture(scope="module")
def ray_client(ray_cluster, cache_dir):
    """Two CPU run actors and one compile actor, half a CPU each, no standbys (a small footprint)."""
    config = cpu_config(
        cache_dir,
        backend="ray",
        ray_run_actors=2,
        ray_cpus_per_actor=0.5,
        standby_run_workers=False,
        run_timeout_s=120,
    )
    with SandboxClient(config) as sb:
        sb.start()
        yield sb


def _judge_batch(sb: SandboxClient) -> dict[str, dict]:
    futures = {
        sol: sb.submit(EXAMPLES / "problems" / f"{prob}.py", EXAMPLES / "solutions" / sol, judge=FAST)
        for prob, sol in BATCH
    }
    return {sol: f.result(timeout=600) for sol, f in futures.items()}


def test_ray_backend_judges_a_batch_like_the_local_pool(ray_client, client):
    run_pool = ray_client._fleet.run
    assert ray_client.device == "cpu" and len(run_pool.workers) == 2
    actor_pids = {w.info["pid"] for w in run_pool.workers}
    assert os.getpid() not in actor_pids and len(actor_pids) == 2  # actors are processes of their own

    ray_results = _judge_batch(ray_client)
    local_results = _judge_batch(client)

    def verdicts(results):
        return {sol: (r["status"], r["stage"], r["check"]) for sol, r in results.items()}

    assert verdicts(ray_results) == verdicts(local_results)
    assert [ray_results[sol]["status"] for _, sol in BATCH] == [
        "correct",
        "incorrect",
        "runtime_error",
        "rejected",
        "compile_error",
    ]
    assert ray_results["1_relu__triton.py"]["environment"]["device"] == "cpu"
    # Four candidates reached the run stage while the other was busy: both run actors judged.
    assert all(w.requests >= 1 for w in run_pool.workers), [w.requests for w in run_pool.workers]


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_actor_killed_mid_request_gets_a_verdict_and_is_replaced(ray_client, ray_cluster):
    pool = ray_client._fleet.run
    hang = ray_client.submit(RELU_PROBLEM, relu_with("while True:\n    pass"), judge=FAST)
    victim = _wait_for(lambda: pool.in_use()[:1], 120, "the hanging candidate to reach a run actor")[0]
    slot = pool.workers.index(victim)
    bystander = ray_client.submit(RELU_PROBLEM, src(RELU_TRITON), judge=FAST)  # on the other run actor
    time.sleep(1.0)  # the candidate is spinning inside the actor's worker now
    ray_cluster.kill(victim.actor, no_restart=True)

    res = hang.result(timeout=300)
    assert res["status"] == "runtime_error", res["error"]
    assert "Ray actor of the run" in res["error"] and res["reward"] == -1.0
    assert bystander.result(timeout=300)["status"] == "correct"  # nothing else was lost

    replaced = _wait_for(
        lambda: pool.workers[slot] if pool.workers[slot] is not victim else None, 300, "the replacement"
    )
    assert replaced.actor_id != victim.actor_id and replaced.generation == victim.generation + 1
    with pytest.raises(ray_cluster.exceptions.RayActorError):
        ray_cluster.get(victim.actor.start.remote(), timeout=60)  # the old actor is gone for good
    # Two requests in a row: the idle queue hands out the other actor first, then the replacement.
    for _ in range(2):
        assert ray_client.evaluate(RELU_PROBLEM, src(RELU_TRITON), judge=FAST)["status"] == "correct"
    assert replaced.requests >= 1


def test_worker_killed_inside_its_actor_is_restarted_there(ray_client):
    """A candidate that kills its own worker process: the actor survives and restarts the worker, as the
    local pool would, and the request gets the local pool's verdict."""
    pool = ray_client._fleet.run
    before = {w.actor_id for w in pool.workers}
    res = ray_client.evaluate(RELU_PROBLEM, relu_with("import os\nos.abort()"), judge=FAST)
    assert res["status"] == "runtime_error" and "SIGABRT" in res["error"], res["error"]
    assert res["stage"] == "correctness" and "Ray actor" not in res["error"]
    assert {w.actor_id for w in pool.workers} == before  # no actor was replaced
    for _ in range(2):  # both actors, including the one whose worker was restarted
        assert ray_client.evaluate(RELU_PROBLEM, src(RELU_TRITON), judge=FAST)["status"] == "correct"


def test_actor_maps_client_paths_onto_its_node(tmp_path):
    """No shared filesystem: the client's temp and cache paths in a request become the actor's own."""
    from kernels_env.runtime.ray_actor import SandboxActor

    client_tmp, client_cache = "/client/tmp/kernels_env-abc", "/client/home/.cache/cuda_agent_jax"
    spec = {
        "role": "compile",
        "device": "cpu",
        "name": "compile0",
        "env": {"KERNELS_ENV_CACHE_DIR": client_cache + "/fastpath", "CUDA_VISIBLE_DEVICES": ""},
        "client_tmp": client_tmp,
        "client_cache": client_cache,
        "cache_dir": str(tmp_path / "node_cache"),
        "memory_limit_bytes": 2**30,
        "startup_timeout_s": 10,
    }
    actor = SandboxActor(spec)  # workers are not started: only the mapping is under test
    try:
        assert actor.pool.workers[0].env["KERNELS_ENV_CACHE_DIR"] == str(tmp_path / "node_cache/fastpath")
        req = CompileRequest(
            id="r1",
            reference=Source(name="ref.py", text="x"),
            solution=Source(name="sol.py", text="y"),
            workdir=client_tmp + "/req-r1",
            timeout_s=1,
            env={"TORCH_EXTENSIONS_DIR": client_cache + "/torch_extensions/ab", "OTHER": "/client/tmp/x"},
        )
        actor._localize(req)
        assert req.workdir == str(actor.tmp / "req-r1") and actor.tmp.is_dir()
        assert req.env["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "node_cache/torch_extensions/ab")
        assert req.env["OTHER"] == "/client/tmp/x"  # a sibling of the temp directory, not inside it
    finally:
        actor.close()
    assert not actor.tmp.exists()


def test_ray_is_imported_only_by_the_ray_backend():
    code = (
        "import json, sys\n"
        "from kernels_env.client import SandboxClient\n"
        "from kernels_env.rules.config import SandboxConfig\n"
        "SandboxClient(SandboxConfig(backend='local'))\n"
        "print(json.dumps('ray' in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) is False
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        SandboxClient(cpu_config(Path("/tmp"), backend="slurm"))


def test_device_and_run_actors_follow_the_cluster_resources():
    from kernels_env.runtime.errors import SandboxError
    from kernels_env.runtime.ray_fleet import resolve_device, run_actor_count

    assert resolve_device("auto", 0) == "cpu" and resolve_device("auto", 4) == "cuda"
    assert resolve_device("cpu", 4) == "cpu"
    with pytest.raises(SandboxError, match="no GPU resources"):
        resolve_device("cuda", 0)
    cfg = cpu_config(Path("/tmp"), backend="ray")
    assert run_actor_count(cfg, "cuda", 8) == 8 and run_actor_count(cfg, "cpu", 0) == 1
    cfg.num_gpu_workers = 2
    assert run_actor_count(cfg, "cuda", 8) == 2
    cfg.ray_run_actors = 16  # never more run actors than GPUs: they would share a GPU and its timings
    assert run_actor_count(cfg, "cuda", 8) == 8 and run_actor_count(cfg, "cpu", 0) == 16
