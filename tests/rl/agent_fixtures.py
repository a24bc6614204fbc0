"""Offline fixtures of the agent pipeline's tests: a tiny Hugging Face Qwen2 checkpoint made here (random
weights by transformers, a byte-level BPE trained with ``tokenizers`` on the agent's own prompts and tools,
a ChatML chat template with tools: ``TINY_TEMPLATE``), a KernelBench-format problem with a correct Triton
solution (CPU sandbox: the Triton interpreter runs it), and a scripted policy's script that solves it."""

from __future__ import annotations

import json
from pathlib import Path

from research.agent import TOOL_SPECS
from research.agent.policies.chat import TINY_TEMPLATE
from research.agent.prompts import SINGLE_TURN, SYSTEM, TASK
from research.rl.pipeline import PipelineConfig

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

SCALE_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(256)]


def get_init_inputs():
    return []
"""

SCALE_TRITON = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out
"""


def write_problems(root: Path, n: int = 2) -> Path:
    """``n`` copies of the scale problem under ``root/level1`` (distinct task ids)."""
    d = root / "level1"
    d.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (d / f"{i + 1}_scale{i}.py").write_text(SCALE_PROBLEM)
    return root


def solve_script() -> list[dict]:
    """A scripted episode that writes the solution, verifies it and submits."""
    return [
        {"name": "write_file", "arguments": {"path": "model_new.py", "content": SCALE_TRITON}},
        {"name": "verify", "arguments": {}},
        {"name": "submit", "arguments": {}},
    ]


def make_tiny_hf(path: Path, vocab_size: int = 512, layers: int = 2, hidden: int = 64) -> Path:
    """A Qwen2 checkpoint directory with a BPE tokenizer trained offline and a tool-calling template: the
    text policy's own builder at a tiny size, its tokenizer trained on the agent's prompts and this task."""
    from research.textpolicy import TextPolicySpec, build_checkpoint

    spec = TextPolicySpec(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=hidden * 2,
        dtype="float32",
    )
    corpus = [SYSTEM, TASK, SINGLE_TURN, SCALE_PROBLEM, SCALE_TRITON, json.dumps(TOOL_SPECS), TINY_TEMPLATE]
    build_checkpoint(path, spec, texts=corpus * 4)
    return path


def agent_config(out: Path, ckpt: Path, problems: Path, demos: Path | None, **over) -> PipelineConfig:
    """The agent_cpu preset's sizes (conf/preset/agent_cpu.yaml), in Python."""
    import models

    roll = dict(episodes=4, group_size=2, max_context=2560, max_turn_tokens=24)
    from kernels_env.client import JudgeConfig, SandboxConfig

    cfg = PipelineConfig(
        out_dir=str(out),
        env="agent",
        sandbox=SandboxConfig(
            device="cpu",
            num_compile_workers=1,
            compile_timeout_s=120,
            run_timeout_s=120,
            memory_limit_gb=4.0,
            standby_run_workers=False,
        ),
        judge=JudgeConfig(time_candidate=False, num_trials=2, families=[]),
        model=models.ModelSpec(checkpoint=str(ckpt), compute_dtype="float32", attention_impl="xla"),
        tasks={"source": "dir", "problems_dir": str(problems)},
        progress=False,
        tensorboard=False,
        **over,
    )
    cfg.sft.demos = str(demos) if demos else None
    cfg.sft.batch_size, cfg.sft.epochs = 2, 2
    cfg.warmup.steps, cfg.warmup.save_every = 1, 1
    cfg.ppo.steps, cfg.ppo.save_every = 3, 1
    cfg.value.steps, cfg.value.batch_size = 2, 4
    cfg.rft.batch_size, cfg.rft.epochs, cfg.rft.rollout_batches = 4, 1, 1
    for stage, turns in ((cfg.warmup, 1), (cfg.rft, 2), (cfg.ppo, 2)):
        for k, v in {**roll, "turns": turns}.items():
            setattr(stage.rollout, k, v)
    cfg.__post_init__()
    return cfg
