"""GPU: a batch of Flax-policy episodes (tiny random model) against the GPU sandbox: every episode runs its
turns through shared sampler calls, its workspace (seeded with a correct Triton kernel) is judged on the
GPU with comparable timings, and the token trajectory is consistent."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import models
from kernels_env.client import JudgeConfig, SandboxClient, SandboxConfig
from kernels_env.session import WorkspaceSession
from research.agent import Budgets, run_episode
from research.agent.policies.chat import TINY_TEMPLATE
from research.agent.policies.flax_policy import FlaxPolicy

from .conftest import RELU_PROBLEM, RELU_TRITON


@pytest.mark.gpu
def test_flax_policy_batch_against_the_gpu_sandbox(tmp_path):
    problem = Path(tmp_path / "1_relu.py")
    problem.write_text(RELU_PROBLEM)
    model = models.init_model(models.tiny_config(compute_dtype="bfloat16"), seed=0)
    policy = FlaxPolicy(
        model,
        models.default_tokenizer(),
        template=TINY_TEMPLATE,
        max_tokens=64,
        batch_buckets=(4,),
        max_wait_s=1.0,
    )
    judge = JudgeConfig(num_trials=2, families=[])
    with SandboxClient(SandboxConfig(device="cuda", cache_dir=str(tmp_path / "cache")), judge) as sb:

        def one(i):
            with WorkspaceSession(problem, client=sb, initial_files={"model_new.py": RELU_TRITON}) as ws:
                return run_episode(f"ep{i}", RELU_PROBLEM, policy, ws, Budgets(max_turns=4), judge)

        try:
            with ThreadPoolExecutor(4) as pool:
                results = list(pool.map(one, range(4)))
        finally:
            policy.close()
    assert max(c["batch"] for c in policy.batcher.calls) == 4
    for res in results:
        assert res.end_reason == "max_turns" and len(res.turns) == 4
        assert res.verdict["status"] == "correct" and res.verdict["timings"]["comparable"]
        tok = res.tokens
        assert sum(tok["response_mask"]) == sum(t["end"] - t["start"] for t in tok["turns"])
        assert all(lp <= 0 for lp in tok["logprobs"])
