"""Multi-process learner, pipeline and device selection (issues 14, 16 and 30, the CPU-checkable parts).

Two local processes of 4 fake CPU devices each (jax.distributed over gloo) run the PPO update of
test_sharded.py on a (2, 2, 2) mesh over all 8 devices; it must equal the same update in one process of 8
devices within 1e-5 (reduction order only), and the checkpoint both processes wrote must restore in either
setting. The devices config must reach JAX before its backend exists and the sandbox through its config.

The staged pipeline in two processes of one CPU device each (pipeline_mp_check.py: pretraining, RFT, value
pretraining, PPO, evaluations, export; RuleJudge, no sandbox): the rollouts are split (each process plays
its own episodes of the draw), both pack the same batches, and it equals one process of 2 devices replaying
the same two shares (the same sampled tokens; metrics within 1e-5, the learners' reduction order only)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

import models
from research import rl

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env = {k: v for k, v in env.items() if not k.startswith(("SLURM_", "OMPI_", "JAX_COORDINATOR"))}
    return {**env, "PYTHONPATH": str(ROOT)}


def _report(proc_out: str) -> dict:
    return json.loads(proc_out.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("mp")
    script, port = str(HERE / "multiprocess_check.py"), str(_free_port())
    workers = [
        subprocess.Popen(
            [sys.executable, script, "worker", str(i), port, str(out)],
            env=_env(),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    reports = []
    for w in workers:
        stdout, stderr = w.communicate(timeout=600)
        assert w.returncode == 0, stderr[-4000:]
        reports.append(_report(stdout))
    single = subprocess.run(
        [sys.executable, script, "single", str(out)],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert single.returncode == 0, single.stderr[-4000:]
    return reports, _report(single.stdout), np.load(out / "mp.npz"), np.load(out / "single.npz")


def test_two_processes_span_one_mesh(runs):
    reports, single, _, _ = runs
    assert [(r["process"], r["processes"], r["devices"], r["local_devices"]) for r in reports] == [
        (0, 2, 8, 4),
        (1, 2, 8, 4),
    ]
    assert single["processes"] == 1 and single["devices"] == 8
    assert {r["tokens_sharding"] for r in reports} == {"P(('data', 'fsdp'),)"}


def test_two_process_ppo_update_equals_one_process(runs):
    _, _, mp, one = runs
    assert sorted(mp.files) == sorted(one.files) and any(k.startswith("metric/") for k in mp.files)
    assert max(float(np.max(np.abs(mp[k] - one[k]))) for k in mp.files) < 1e-5  # params, moments, metrics


def test_objects_gathered_from_every_process_in_process_order(runs):
    reports, _, _, _ = runs
    p0 = [{"process": 0, "text": "é" * 3}]
    p1 = [{"process": 1, "text": "é" * 53}] * 2 + [[0.1, None, True]]
    assert [r["gathered"] for r in reports] == [p0 + p1] * 2
    assert [r["agreed"] for r in reports] == [[0.5, False]] * 2


def test_two_process_checkpoint_restores(runs):
    reports, single, _, _ = runs
    assert [r["restore_diff"] for r in reports] == [0.0, 0.0]  # bit-exact on the same 2-process mesh
    assert [r["cursor"] for r in reports] == [{"batch": 7}] * 2
    assert single["single_restore_diff"] < 1e-5 and single["restored_step"] == 1  # onto one device


@pytest.fixture(scope="module")
def pipeline_runs(tmp_path_factory):
    """The two-process pipeline and the one-process replay of its two shares, started together."""
    out = tmp_path_factory.mktemp("mp_pipeline")
    script, port = str(HERE / "pipeline_mp_check.py"), str(_free_port())
    roles = [["worker", "0", port], ["worker", "1", port], ["single"]]
    procs = [
        subprocess.Popen(
            [sys.executable, script, *r, str(out)],
            env=_env(),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in roles
    ]
    for p in procs:
        _, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-4000:]
    load = lambda name: json.loads((out / f"{name}.json").read_text())
    return out, [load("worker0"), load("worker1")], load("single0")


def test_pipeline_rollouts_split_over_two_processes(pipeline_runs):
    _, (w0, w1), single = pipeline_runs
    assert [(r["process"], r["processes"], r["devices"]) for r in (w0, w1)] == [(0, 2, 2), (1, 2, 2)]
    assert (single["processes"], single["devices"]) == (1, 2)
    # evaluations of 3 tasks (2 splits) after pretraining, RFT and PPO; RFT's 2 batches, PPO's 2 steps
    assert [r["n"] for r in w0["rollouts"]] == [3, 3, 8, 8, 3, 3, 8, 8, 3, 3]
    assert len(w1["rollouts"]) == len(single["rollouts"]) == 10
    for a, b, s in zip(w0["rollouts"], w1["rollouts"], single["rollouts"]):
        assert a["n"] == b["n"] == s["n"] and a["groups"] == b["groups"] == s["groups"]
        assert a["mine"] == list(range(0, a["n"], 2)) and b["mine"] == list(range(1, a["n"], 2))
        assert s["mine"] == list(range(a["n"]))
        if a["n"] == 8:  # the draw's groups, each split over both processes
            assert a["groups"] == [f"{a['cursor']}:{i // 2}" for i in range(8)]


def test_every_process_packs_the_same_batch(pipeline_runs):
    _, (w0, w1), single = pipeline_runs
    assert len(w0["batches"]) == 8 and w0["batches"] == w1["batches"]  # RFT 4, value 2, PPO 2
    # the same sampled tokens as one process playing both shares (log-probs: the samplers' layouts differ)
    assert [b["tokens"] for b in w0["batches"]] == [b["tokens"] for b in single["batches"]]


def _numbers(row: dict, prefix="") -> dict:
    return {
        prefix + k: v for k, v in row.items() if isinstance(v, (int, float)) and not k.startswith("time/")
    }


def test_two_process_pipeline_equals_one_process_playing_both_shares(pipeline_runs):
    _, (w0, _), single = pipeline_runs
    steps = {"rft": [1, 2, 3, 4], "value": [1, 2], "ppo": [1, 2]}
    for stage, want in steps.items():
        assert [r["step"] for r in w0[stage]] == [r["step"] for r in single[stage]] == want
        for a, b in zip(w0[stage], single[stage]):
            na, nb = _numbers(a), _numbers(b)
            assert na.keys() == nb.keys() and max(abs(na[k] - nb[k]) for k in na) < 1e-5
    assert {"reward_mean", "actor_grad_norm", "value_loss"} <= w0["ppo"][0].keys()
    assert {"nll"} <= w0["rft"][0].keys() and {"value_loss"} <= w0["value"][0].keys()
    assert w0["value_ev"] == single["value_ev"]
    assert 0 < w0["ppo"][0]["invalid_turn_rate"] < 1  # some plans parsed and were judged
    for key in ("pretrain_eval", "eval"):
        ea = {k: v for split, m in w0[key].items() for k, v in _numbers(m, split + "/").items()}
        eb = {k: v for split, m in single[key].items() for k, v in _numbers(m, split + "/").items()}
        assert ea.keys() == eb.keys() and max(abs(ea[k] - eb[k]) for k in ea) < 1e-5


def test_pipeline_files_written_once_and_the_export_restores(pipeline_runs):
    out, (w0, w1), single = pipeline_runs
    tb = lambda files: [f for f in files if "/tensorboard/" not in f]
    assert tb(w0["files"]) == tb(w1["files"]) == tb(single["files"])  # no file of process 1's own
    want = {"pipeline.json", "ppo/manifest.json", "ppo/eval.json", "final_policy/EXPORTED.json"}
    assert want | {"rft/trajectories.jsonl", "rft/trajectories.hash"} <= set(w0["files"])
    assert json.loads((out / "worker" / "ppo" / "manifest.json").read_text())["step"] == 2
    params = {}
    for role in ("worker", "single"):
        model = models.restore_checkpoint(out / role / "final_policy")
        params[role] = [np.asarray(x) for x in jax.tree.leaves(nnx.to_pure_dict(nnx.state(model)))]
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(params["worker"], params["single"])) < 1e-5


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"mode": "on"}, "distributed.mode must be one of"),
        (
            {"mode": "manual", "num_processes": 2},
            "needs distributed.coordinator_address, distributed.process_id",
        ),
        ({"coordinator_address": "node0"}, "host:port"),
        ({"num_processes": 2, "process_id": 2}, r"process_id must be in \[0, 2\)"),
    ],
)
def test_wrong_distributed_config_says_what(kw, match):
    with pytest.raises(ValueError, match=match):
        rl.DistributedConfig(**kw)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"jax_memory_fraction": 0.0}, r"in \(0, 1\]"),
        ({"judge_gpus": [1, 1]}, "distinct"),
        ({"learner_gpus": []}, "distinct"),
    ],
)
def test_wrong_devices_config_says_what(kw, match):
    with pytest.raises(ValueError, match=match):
        rl.DevicesConfig(**kw)


def test_devices_applied_before_jax_backend():
    args = ["devices.learner_gpus=[0,1]", "devices.judge_gpus=[2,3]", "devices.jax_memory_fraction=0.6"]
    proc = subprocess.run(
        [sys.executable, str(HERE / "devices_check.py"), str(ROOT / "conf"), *args],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = _report(proc.stdout)
    assert r["backends_before"] is False
    assert r["mem_fraction"] == "0.6" and r["jax_cuda_visible_devices"] == "0,1"
    assert r["cuda_visible_devices"] == "0,1,2,3"  # inherited by the sandbox workers: unchanged
    assert r["sandbox_gpus"] == [2, 3] and r["devices"] >= 1
    assert "already exist" in r["late_error"]


def test_judge_gpus_pick_the_sandbox_workers_gpus(monkeypatch):
    from kernels_env.runtime import devices
    from kernels_env.runtime.errors import SandboxError

    monkeypatch.setattr(devices, "visible_gpus", lambda: ["4", "5", "6", "7"])  # CUDA_VISIBLE_DEVICES=4,5,6,7
    assert devices.resolve("auto") == ("cuda", ["4", "5", "6", "7"])  # default: every visible GPU
    assert devices.resolve("cuda", [2, 3]) == ("cuda", ["6", "7"])
    with pytest.raises(SandboxError, match="no GPU"):
        devices.resolve("cuda", [4])


def test_judge_gpus_and_sandbox_gpus_must_agree():
    from kernels_env.client import SandboxConfig
    from research.rl.pipeline.config import PipelineConfig

    with pytest.raises(ValueError, match="disagree"):
        PipelineConfig(devices=rl.DevicesConfig(judge_gpus=[1]), sandbox=SandboxConfig(gpus=[0]))
    assert PipelineConfig().sandbox.gpus is None  # default: shared as before


def test_auto_mode_outside_a_cluster_says_so():
    code = "from research import rl; rl.initialize_distributed(rl.DistributedConfig(mode='auto'))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**_env(), "JAX_PLATFORMS": "cpu"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "distributed.mode=auto" in proc.stderr.strip().splitlines()[-1], proc.stderr[-2000:]
