"""One ``env=agent`` RL step end to end on one GPU: the real agent loop (prompts with the tools, the Flax
policy's lockstep batched generation with its KV cache kept across turns, the sandbox's tools and final
verdicts) -> typed trajectories -> packed batch -> PPO update -> the updated weights swapped into the sampler.
Reports where the step's time goes and the GPU's idle share.

    python -m benchmarks.rl.agent_rl_step --problems DIR --out /tmp/agent_rl_step.json     # GPU, ~0.5B Qwen2
    python -m benchmarks.rl.agent_rl_step --smoke --problems DIR --out /tmp/s.json         # CPU, tiny model

The policy is a random-weight model of Qwen2.5-0.5B's shape (fp32 master weights, bf16 compute) with the
bundled tokenizer: it practically never writes its end-of-turn token among 151,936 ids, so every turn runs to
``--turn-tokens`` (the cost is real) and no turn is a valid tool call (each gets the loop's "no tool call"
note as its observation). Every workspace starts with a correct, kernel-less ``ModelNew``
(``AgentEnvConfig.seed_solution``), so each episode's final verdict is a real judgement by CUDA Agent's judge
(timed against eager, no compile baseline: torch.compile's take minutes cold).

Step 0 compiles (sampler buckets, learner) and starts the sandbox; steps 1.. are measured. Per step:
``weight_swap_s`` (Runtime.sampler: set_model on the learner's arrays), ``rollout_s`` (wall) with its
``generate_s`` (the batcher's sampler calls) and ``episode_tools_s`` / ``episode_judge_s`` (summed over
episodes, which run concurrently), ``pack_s``, ``learn_s`` (Learner.ppo_step), ``step_s``; GPU idle from
NVML samples over the step (benchmarks/rl/rl_step.py's GpuUtil), and the learner's own view
1 - (generate + learn) / step.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._results import default_path, env_info, write_results
from benchmarks.rl.rl_step import GpuUtil

ROOT = Path(__file__).resolve().parents[2]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", required=True, help="a directory of KernelBench-format problems")
    ap.add_argument("--out", default=None, help="results JSON (default: runs/benchmarks/)")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--group", type=int, default=2)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--turn-tokens", type=int, default=512)
    ap.add_argument("--context", type=int, default=6144)
    ap.add_argument("--steps", type=int, default=3, help="including the compile step 0")
    ap.add_argument("--micro-batches", type=int, default=8, help="the learner's gradient accumulation")
    ap.add_argument("--smoke", action="store_true", help="CPU: tiny model, CPU sandbox")
    ap.add_argument("--run-dir", default=None, help="the pipeline's run directory (default: a temporary one)")
    args = ap.parse_args(argv)
    args.out = args.out or str(default_path("agent_rl_step"))
    if not Path(args.problems).is_dir():  # a user error: one line, before anything starts
        raise SystemExit(f"error: --problems {args.problems}: not a directory")
    # the run directory (checkpoints, logs) stays out of --out's folder: only the JSON is the result
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="agent_rl_step_")

    import jax

    import models
    from kernels_env.client import JudgeConfig, SandboxConfig
    from research.agent import TasksConfig
    from research.rl import Learner, PackConfig, pack_trajectories
    from research.rl.pipeline import PipelineConfig, Runtime
    from research.rl.pipeline.agent_env import AgentEnvConfig

    if args.smoke:
        arch = models.tiny_config(
            hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32, intermediate_size=128
        )
        spec = models.ModelSpec(arch=arch, compute_dtype="float32", attention_impl="xla")
        sandbox = SandboxConfig(device="cpu", num_compile_workers=1, memory_limit_gb=4.0)
    else:
        spec = models.ModelSpec(
            arch=models.qwen2_0_5b_config(), compute_dtype="bfloat16", attention_impl="cudnn", remat="none"
        )
        sandbox = SandboxConfig(device="auto")
    episodes = args.tasks * args.group
    rollout = dict(
        turns=args.turns,
        episodes=episodes,
        group_size=args.group,
        max_context=args.context,
        max_turn_tokens=args.turn_tokens,
    )
    cfg = PipelineConfig(
        out_dir=run_dir,
        env="agent",
        model=spec,
        tasks=TasksConfig(source="dir", problems_dir=args.problems, limit=args.tasks),
        sandbox=sandbox,
        judge=JudgeConfig(baselines=["eager"], time_candidate=not args.smoke),
        agent=AgentEnvConfig(seed_solution=True, max_observation_bytes=2048),
    )
    cfg.ppo.rollout = dataclasses.replace(cfg.ppo.rollout, **rollout)
    cfg.ppo.learner.micro_batches = args.micro_batches
    rt = Runtime(cfg)
    util = GpuUtil() if not args.smoke else None
    try:
        actor = models.init_model(dataclasses.replace(spec.arch, **spec.runtime()), 0)
        critic = models.Critic.from_policy(actor, seed=0)
        learner = Learner(cfg.ppo.learner, actor, critic)
        del actor, critic
        pack = PackConfig(
            max_len=cfg.ppo.rollout.max_len, pad_to=256, rows_multiple=args.micro_batches, pad_id=rt.pad_id
        )
        rows = []
        for step in range(args.steps):
            t0 = time.perf_counter()
            sampler = rt.sampler(learner.actor_model(), cfg.ppo.rollout)
            swap = rt.timings["weight_swap_s"]
            trajs = rt.env.rollout(sampler, cfg.ppo.rollout, step)
            t1 = time.perf_counter()
            batch, drops, _ = pack_trajectories(trajs, cfg.reward, pack)
            if batch is None:  # nothing to learn from: say why instead of failing inside the learner
                raise RuntimeError(f"step {step}: every episode was dropped before learning: {dict(drops)}")
            t2 = time.perf_counter()
            metrics = learner.ppo_step(batch)
            jax.block_until_ready(learner.state)
            t3 = time.perf_counter()
            tm = rt.env.timings
            row = {
                "step": step,
                "episodes": len(trajs),
                "dropped": dict(drops),
                "weight_swap_s": swap,
                "rollout_s": t1 - t0 - swap,
                "generate_s": tm["generate_s"],
                "generated_tokens": tm["generated_tokens"],
                "generate_calls": tm["generate_calls"],
                "episode_tools_s": tm["tools_s"],
                "episode_judge_s": tm["judge_s"],
                "pack_s": t2 - t1,
                "learn_s": t3 - t2,
                "step_s": t3 - t0,
                "batch_shape": list(batch.tokens.shape),
                "statuses": sorted({(t.verdict or {}).get("status", "?") for t in trajs}),
                "entropy": float(metrics.get("entropy", float("nan"))),
                "logprob_gap_sampler": float(metrics.get("logprob_gap_sampler", float("nan"))),
            }
            row["learner_idle_share"] = 1.0 - (row["generate_s"] + row["learn_s"]) / row["step_s"]
            if util is not None:
                row["gpu"] = util.window(t0, t3)
            rows.append(row)
            print(json.dumps(row), flush=True)
            # progressive: an outer timeout still leaves the steps measured so far
            write_results("agent_rl_step", _summary(args, rows, util), args.out)
    finally:
        if util is not None:
            util.stop()
        rt.close()
    out = _summary(args, rows, util)
    write_results("agent_rl_step", out, args.out)
    print(json.dumps(out["median"], indent=2))
    return out


def _summary(args, rows: list[dict], util) -> dict:
    """The results: every step's row and the medians over the measured steps (step 0 compiles)."""
    timed = rows[1:] or rows
    med = {k: statistics.median(r[k] for r in timed) for k in rows[0] if isinstance(rows[0][k], float)}
    if util is not None:
        idle = [r["gpu"]["idle_share"] for r in timed if r["gpu"]["idle_share"] is not None]
        med["gpu_idle_share"] = statistics.median(idle) if idle else None
    return {"benchmark": "agent_rl_step", "args": vars(args), "env": env_info(), "rows": rows, "median": med}


if __name__ == "__main__":
    main()
