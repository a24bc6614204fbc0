"""Shared pieces of the pipeline tests: a scripted sampler, a rule-based stand-in for the sandbox judge
(mechanics tests that need no sandbox process) and tiny pipeline configs."""

from __future__ import annotations

import dataclasses

import numpy as np

import models
from kernels_env.client import get_reward
from research.rl.pipeline import PipelineConfig, PretrainConfig, RolloutConfig
from research.toyenv import Judgement, PlanError, ToyTaskConfig, render_plan


class ScriptedSampler:
    """Returns the next scripted token list per call and row (with <eos> stopping), log-prob -0.5 each."""

    def __init__(self, script, eos):
        self.script, self.eos, self.calls, self.contexts = script, eos, 0, []

    def generate(self, prompts, config, seed=0):
        rows = [self.script[self.calls][i] for i in range(len(prompts))]
        self.calls += 1
        self.contexts.append([list(p) for p in prompts])
        m = config.max_new_tokens
        toks = np.zeros((len(rows), m), np.int32)
        lp = np.zeros((len(rows), m), np.float32)
        lengths, finish = [], []
        for i, r in enumerate(rows):
            r = r[:m]
            toks[i, : len(r)] = r
            lp[i, : len(r)] = -0.5
            lengths.append(len(r))
            finish.append("eos" if r and r[-1] == self.eos else "length")
        return models.SampleOutput(
            prompts, toks, lp, np.arange(m)[None] < np.array(lengths)[:, None], np.array(lengths), finish
        )


class RuleJudge:
    """Correct iff the plan renders, runs the task's ops in order along the last axis with tail masks;
    fused plans are 'faster' (eager 1.3x, compile 1.1x), unfused ones slower (0.8x). Tiered reward."""

    invalid_reward = -1.0

    def __init__(self):
        self.judged = 0
        self.reward = get_reward("cuda_agent")

    def judge_many(self, items, use_cache=True):
        out = []
        for task, plan in items:
            self.judged += 1
            try:
                render_plan(task, plan)
            except PlanError as exc:
                out.append(Judgement("invalid_plan", self.invalid_reward, error=str(exc)))
                continue
            ok = plan.ops == task.ops and all(k.mask for k in plan.kernels)
            ok = ok and all(s.axis == 1 for k in plan.kernels for s in k.steps)
            fused = any(len(k.steps) > 1 for k in plan.kernels)
            speedups = {"eager": 1.3, "compile": 1.1} if fused else {"eager": 0.8, "compile": 0.7}
            status = "correct" if ok else "incorrect"
            out.append(Judgement(status, self.reward(status, speedups), speedups if ok else {}))
        return out


SMALL_TASKS = ToyTaskConfig(num_train=8, num_test=4, num_heldout=4, decontam_dir=None)
TINY_ARCH = dict(
    vocab_size=91,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    intermediate_size=64,
    bos_token_id=1,
    eos_token_ids=(2,),
    pad_token_id=0,
    max_position_embeddings=256,
    compute_dtype="float32",
    attention_impl="xla",
)


def tiny_pipeline(out_dir, **kw) -> PipelineConfig:
    ro = dict(episodes=8, group_size=2, max_turn_tokens=32, max_context=96)
    cfg = PipelineConfig(
        out_dir=str(out_dir),
        model=models.ModelSpec(arch=models.tiny_config(**TINY_ARCH)),
        tasks=SMALL_TASKS,
        pretrain=PretrainConfig(steps=30, batch_size=16, num_corpus_tasks=24, log_every=10, lr=3e-3),
        judge_cache=None,
        progress=False,
    )
    cfg.warmup.steps, cfg.warmup.rollout = 2, RolloutConfig(turns=1, seed=1, **ro)
    cfg.rft.rollout, cfg.rft.rollout_batches, cfg.rft.batch_size = RolloutConfig(turns=2, seed=2, **ro), 2, 4
    cfg.rft.epochs = 1
    cfg.value.steps, cfg.value.batch_size = 2, 8
    cfg.ppo.steps, cfg.ppo.rollout = 2, RolloutConfig(turns=2, seed=3, **ro)
    for part, value in kw.items():
        cfg = dataclasses.replace(cfg, **{part: value})
    return cfg
