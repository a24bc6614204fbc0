"""The staged pipeline through the real agent loop (``env=agent``) on CPU, end to end: a tiny Hugging Face
checkpoint made offline, demonstrations written by a scripted policy through ``research.agent.run_agent``,
every stage (init, SFT, warm-up, RFT, value, PPO), the export, and the exported policy playing through
``experiments.agent``'s runner; resume after SIGKILL mid-PPO gives the uninterrupted run's metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from agent_fixtures import agent_config, make_tiny_hf, solve_script, write_problems

from kernels_env.client import SandboxClient
from research.agent import AgentConfig, FlaxPolicyConfig, RunConfig, ScriptedPolicy, TasksConfig, run_agent
from research.rl.pipeline import run_pipeline
from research.rollout import read_trajectories

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    cfg = agent_config(Path("unused"), Path("unused"), Path("unused"), None)
    cfg.sandbox.cache_dir = str(tmp_path_factory.mktemp("agent_pipeline_cache"))
    with SandboxClient(cfg.sandbox, cfg.judge) as sb:
        yield sb


@pytest.fixture(scope="module")
def setup(tmp_path_factory, sandbox):
    root = tmp_path_factory.mktemp("agent_pipeline")
    ckpt = make_tiny_hf(root / "ckpt")
    problems = write_problems(root / "problems", 2)
    demos = root / "demos"
    run_agent(
        RunConfig(
            agent=AgentConfig(max_turns=4, skills=False, concurrency=2),
            tasks=TasksConfig(problems_dir=str(problems)),
            out_dir=str(demos),
            progress=False,
        ),
        policy=ScriptedPolicy(solve_script()),
        client=sandbox,
    )
    return root, ckpt, problems, demos / "trajectories.jsonl"


def test_every_stage_export_and_the_exported_policy_plays(setup, sandbox):
    root, ckpt, problems, demos = setup
    out = root / "run"
    manifests = run_pipeline(agent_config(out, ckpt, problems, demos), client=sandbox)
    assert list(manifests) == ["init", "sft", "warmup", "rft", "value", "ppo"]
    assert manifests["init"].actor == str(ckpt.resolve())  # the HF checkpoint in place, not copied
    sft = [json.loads(x) for x in (out / "sft" / "metrics.jsonl").read_text().splitlines()]
    assert sft[-1]["nll"] < sft[0]["nll"]  # 4 steps over the 2 demos (2 epochs of batch 2): NLL falls
    ppo = [json.loads(x) for x in (out / "ppo" / "metrics.jsonl").read_text().splitlines()]
    assert len(ppo) == 3
    for key in (
        "reward_mean",
        "pass_rate",
        "invalid_turn_rate",
        "turns_mean",
        "entropy",
        "logprob_gap_sampler",
        "time/generate_s",
        "time/weight_swap_s",
    ):
        assert key in ppo[-1], key
    assert any(k.startswith("end/") for k in ppo[-1])
    # sampler and learner agree on agent trajectories (fp32: recomputed vs sampled log-probs)
    assert max(r["logprob_gap_sampler"] for r in ppo) < 1e-4
    # RFT's sampled trajectories are typed, with groups of 2 and the sampling config recorded
    trajs = read_trajectories(out / "rft" / "trajectories.jsonl")
    groups = {}
    for t in trajs:
        groups.setdefault(t.group, []).append(t.task_id)
        assert t.sampling.temperature == 1.0 and len(t.turns) >= 1
    assert all(len(v) == 2 and len(set(v)) == 1 for v in groups.values())
    # the export is a Hugging Face checkpoint transformers loads, with the chat template
    final = out / "final_policy"
    assert json.loads((final / "EXPORTED.json").read_text())["stage"] == "ppo"
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(str(final))
    tok = transformers.AutoTokenizer.from_pretrained(str(final))
    assert tok.chat_template and hf.config.vocab_size == 512
    # the exported policy plays through the agent loop (experiments.agent policy=flax policy.model=...)
    summary = run_agent(
        RunConfig(
            policy=FlaxPolicyConfig(model=str(final), dtype="float32", max_tokens=16),
            agent=AgentConfig(max_turns=2, skills=False, concurrency=2),
            tasks=TasksConfig(problems_dir=str(problems)),
            out_dir=str(root / "play"),
            progress=False,
        ),
        client=sandbox,
    )
    assert summary["num_results"] == 2


def test_resume_after_sigkill_mid_ppo_gives_the_same_metrics(setup, sandbox, tmp_path):
    root, ckpt, problems, _ = setup
    full = tmp_path / "full"
    run_pipeline(agent_config(full, ckpt, problems, None, stages=["ppo"]), client=sandbox)
    killed = tmp_path / "killed"
    spec = {"out": str(killed), "ckpt": str(ckpt), "problems": str(problems)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(Path(__file__).with_name("agent_resume_run.py")), json.dumps(spec)]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    ckpts = killed / "ppo" / "checkpoints"
    deadline = time.monotonic() + 600
    while not (ckpts.is_dir() and any(p.name.startswith("step_") for p in ckpts.iterdir())):
        assert proc.poll() is None, "the run ended before its first PPO checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "ppo" / "manifest.json").exists()  # killed mid-PPO, not after it
    assert subprocess.run(cmd, env=env, cwd=ROOT).returncode == 0  # resumes
    read = lambda d: [json.loads(x) for x in (d / "ppo" / "metrics.jsonl").read_text().splitlines()]
    a, b = read(full), read(killed)
    assert [r["step"] for r in b] == [1, 2, 3]
    for ra, rb in zip(a, b):
        for k in ("reward_mean", "entropy", "pg_loss", "value_loss", "logprob_gap_sampler"):
            if k in ra:
                np.testing.assert_allclose(rb[k], ra[k], rtol=1e-5, atol=1e-6, err_msg=k)
