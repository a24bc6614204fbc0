"""A subprocess of the agent pipeline's resume test: the PPO stage of ``agent_config`` with its own CPU
sandbox (argv[1]: JSON with out, ckpt, problems)."""

import json
import sys
from pathlib import Path

from agent_fixtures import agent_config

from kernels_env.client import SandboxClient
from research.rl.pipeline import run_pipeline

spec = json.loads(sys.argv[1])
cfg = agent_config(Path(spec["out"]), Path(spec["ckpt"]), Path(spec["problems"]), None, stages=["ppo"])
with SandboxClient(cfg.sandbox) as client:
    run_pipeline(cfg, client=client)
