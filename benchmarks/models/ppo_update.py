"""PPO update throughput and MFU of research.rl's learner (actor + critic, one jitted update).

    python -m benchmarks.models.ppo_update --json /tmp/ppo.json          # GPU: 0.5B shape, seq 4K and 16K
    python -m benchmarks.models.ppo_update --model 1.5b --seqs 8192 --json /tmp/ppo.json   # GPU: 1.5B shape
    python -m benchmarks.models.ppo_update --smoke --json /tmp/ppo.json  # CPU smoke test (tiny shapes)

One update = actor forward + backward (chunked log-probs, clipped surrogate) and critic forward + backward
(clipped value loss), gradient accumulation over micro-batches, two Optax AdamW steps (fp32 master weights
and moments, bf16 compute), on a prepared batch of random tokens (90% policy tokens). ``prepare`` (old
log-probs and values, forward only) is timed separately.

Model FLOPs reuse ``train_step``'s count (6 N tokens + causal attention 6 L T d_attn tokens, N
counting every parameter once) for the actor; the critic is the same backbone without the vocabulary
product: its N excludes the embedding (a gather, no FLOPs). MFU is reported against the 989 TFLOP/s dense
bf16 peak of an H100/H200 SXM and against the bf16 matmul rate measured in the same run.

Attempts per length: ``--plan attn:batch:micro:remat,...`` (every length), else GPU_PLAN for the 0.5B shape,
else one derived from ``models.memory_plan`` (``benchmarks/models/_plans.py``: ~32K tokens per update, remat
from the lightest that fits to "full", the fewest micro-batches that fit).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks._common.jax_bench import PEAK_BF16, jax_device_info, matmul_rate, table
from benchmarks._common.shapes import add_model_arg, bench_config
from benchmarks._results import env_info, write_results
from benchmarks.models.train_step import model_flops

# (attention, batch, micro_batches, remat) per sequence length: every one is run (within --budget-s) and the
# fastest is the figure: a 0.5B model's activations fit an H200 without remat, which then recomputes nothing;
# the remat policies and a smaller micro-batch stay for comparison (and for a GPU with less memory).
GPU_PLAN = {
    4096: [
        ("cudnn", 8, 2, "none"),
        ("cudnn", 16, 2, "none"),
        ("cudnn", 8, 2, "dots"),
        ("cudnn", 8, 2, "save_attn"),
    ],
    16384: [("cudnn", 2, 1, "none"), ("cudnn", 2, 1, "dots"), ("cudnn", 2, 1, "save_attn")],
}
SMOKE_PLAN = {64: [("xla", 4, 2, "none")]}


def base_config(args):
    """The model every attempt derives from (runtime fields set per attempt): the tiny smoke model with
    --smoke, else the --model shape's architecture (0.5b: ``models.qwen2_0_5b_config()``)."""
    return bench_config(args.model, args.smoke)


def attempt_config(base, attn: str, remat: str, seq: int):
    return base.replace(
        param_dtype="float32",
        compute_dtype="bfloat16",
        attention_impl=attn,
        remat=remat,
        max_position_embeddings=max(seq, base.max_position_embeddings),
    )


def plan_for(args, base) -> dict[int, list[tuple[str, int, int, str]]]:
    """seq -> (attention, batch, micro_batches, remat) attempts: --seqs (default: GPU_PLAN's lengths, the
    smoke plan's with --smoke), each with --plan, the smoke plan, GPU_PLAN (0.5b) or a plan derived from
    models.memory_plan for this shape and length."""
    from benchmarks.models._plans import derived_plan, fail, parse_plan

    fixed = parse_plan(args.plan, 4) if args.plan else None
    default = SMOKE_PLAN if args.smoke else GPU_PLAN
    seqs = [int(s) for s in args.seqs.split(",")] if args.seqs else list(default)
    plan = {}
    for seq in seqs:
        if fixed:
            plan[seq] = fixed
        elif args.smoke:
            if seq not in SMOKE_PLAN:
                fail(f"--smoke runs seq {', '.join(map(str, SMOKE_PLAN))} only (or give --plan)")
            plan[seq] = SMOKE_PLAN[seq]
        elif args.model == "0.5b" and seq in GPU_PLAN:
            plan[seq] = GPU_PLAN[seq]
        else:
            cfg = attempt_config(base, "cudnn", "none", seq)
            plan[seq] = derived_plan(cfg, seq, chunk=args.chunk, critic=True, accumulate=True)
    return plan


def update_flops(cfg, batch: int, seq: int) -> dict:
    actor = model_flops(cfg, batch, seq)
    embed_matmul = 6 * cfg.vocab_size * cfg.hidden_size * actor["tokens"]
    critic = actor["total"] - embed_matmul  # no vocabulary product (tied: the lm head is the embedding)
    return {
        "tokens": actor["tokens"],
        "actor": actor["total"],
        "critic": critic,
        "total": actor["total"] + critic,
    }


def synthetic_batch(cfg, batch: int, seq: int):
    import numpy as np

    from research import rl

    rng = np.random.default_rng(0)
    mask = np.zeros((batch, seq), np.float32)
    mask[:, seq // 10 :] = 1.0
    rewards = np.zeros((batch, seq), np.float32)
    rewards[:, -1] = rng.choice([-1.0, 1.0, 2.0, 3.0], batch)
    return rl.RLBatch(
        tokens=rng.integers(1, cfg.vocab_size, (batch, seq)).astype(np.int32),
        response_mask=mask,
        old_logprobs=np.zeros((batch, seq), np.float32),
        token_rewards=rewards,
        token_discounts=np.ones((batch, seq), np.float32),
        turn_ids=np.where(mask > 0, 0, -1).astype(np.int32),
        group_ids=(np.arange(batch) // 2).astype(np.int32),
    )


def run_config(cfg, batch: int, micro: int, seq: int, steps: int, chunk: int) -> dict:
    import jax

    import models
    from research import rl

    t = time.perf_counter()
    actor = models.init_model(cfg, seed=0)
    critic = models.Critic.from_policy(actor)
    lcfg = rl.LearnerConfig(micro_batches=micro, chunk_size=chunk)
    learner = rl.Learner(lcfg, actor, critic)
    del actor, critic
    data = synthetic_batch(cfg, batch, seq)
    jax.block_until_ready(learner.state)
    init_s = time.perf_counter() - t
    t = time.perf_counter()
    prepared, _ = learner.prepare(data)
    jax.block_until_ready(prepared)
    prepare_compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(steps):
        prepared, _ = learner.prepare(data)
    jax.block_until_ready(prepared)
    prepare_s = (time.perf_counter() - t) / steps
    t = time.perf_counter()
    first = learner.update(prepared)
    compile_s = time.perf_counter() - t
    learner.update(prepared)
    jax.block_until_ready(learner.state)
    t = time.perf_counter()
    for _ in range(steps):
        state, metrics = learner._ppo(learner.state, prepared)  # no host sync per step
        learner.state = state
    jax.block_until_ready(learner.state)
    step_s = (time.perf_counter() - t) / steps
    last = {k: float(v) for k, v in jax.device_get(metrics).items()}
    stats = jax.devices()[0].memory_stats() or {}
    return {
        "init_s": init_s,
        "prepare_first_call_s": prepare_compile_s,
        "prepare_s": prepare_s,
        "update_first_call_s_incl_compile": compile_s,
        "update_s": step_s,
        "metrics_first": first,
        "metrics_last": last,
        "peak_bytes": stats.get("peak_bytes_in_use"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="CPU smoke test with tiny shapes")
    add_model_arg(ap)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=2048, help="tokens per log-prob chunk")
    ap.add_argument("--seqs", type=str, default=None, help="comma-separated lengths (default 4096,16384)")
    ap.add_argument("--plan", type=str, default=None, help="every length's attempts, e.g. 'cudnn:4:2:full'")
    ap.add_argument("--budget-s", type=float, default=500.0)
    args = ap.parse_args()
    start = time.perf_counter()

    import jax

    base = base_config(args)
    plan = plan_for(args, base)
    results: dict = {
        "benchmark": "ppo_update",
        "env": env_info(),
        "device": jax_device_info(),
        "settings": {
            "model": "tiny" if args.smoke else args.model,
            "params": base.num_params(),
            "plan": {s: [list(x) for x in p] for s, p in plan.items()},
            "steps": args.steps,
            "chunk": args.chunk,
            "smoke": args.smoke,
            "peak_bf16": PEAK_BF16,
            "optimizer": "adamw, fp32 master weights and moments",
            "compute_dtype": "bfloat16",
        },
        "flops_formula": "actor: train_step.model_flops; critic: the same minus 6*V*d*tokens",
        "attempts": [],
    }
    measured = matmul_rate(n=512 if args.smoke else 8192, iters=3 if args.smoke else 10)
    results["matmul_bf16_flops"] = measured
    print(f"[ppo] measured bf16 matmul rate: {measured / 1e12:.1f} TFLOP/s", flush=True)
    best: dict = {}
    for seq, configs in plan.items():
        for attn, batch, micro, remat in configs:
            attempt: dict = {
                "seq": seq,
                "attention": attn,
                "batch": batch,
                "micro_batches": micro,
                "remat": remat,
            }
            if time.perf_counter() - start > args.budget_s:
                results["attempts"].append({**attempt, "skipped": "budget"})
                continue
            cfg = attempt_config(base, attn, remat, seq)
            try:
                attempt.update(run_config(cfg, batch, micro, seq, args.steps, args.chunk))
            except Exception as exc:
                attempt["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
                print(
                    f"[ppo] seq {seq} {attn}/{batch}/{micro}/{remat} failed: {attempt['error'][:300]}",
                    flush=True,
                )
                results["attempts"].append(attempt)
                jax.clear_caches()
                continue
            flops = update_flops(cfg, batch, seq)
            attempt.update(
                flops=flops,
                tokens_per_s=flops["tokens"] / attempt["update_s"],
                mfu_vs_989=flops["total"] / attempt["update_s"] / PEAK_BF16,
                mfu_vs_measured=flops["total"] / attempt["update_s"] / measured,
            )
            results["attempts"].append(attempt)
            if seq not in best or attempt["mfu_vs_989"] > best[seq]["mfu_vs_989"]:
                best[seq] = attempt
            print(
                f"[ppo] seq {seq} {attn}/{batch}/{micro}/{remat}: {attempt['update_s'] * 1e3:.1f} ms/update, "
                f"{attempt['tokens_per_s']:.0f} tok/s, MFU {attempt['mfu_vs_989']:.1%} of 989 TFLOP/s",
                flush=True,
            )
            write_results("ppo_update", results, args.json)
            jax.clear_caches()
    rows = [
        [
            a["seq"],
            a["attention"],
            a["batch"],
            a["micro_batches"],
            a["remat"],
            a.get("update_s"),
            a.get("tokens_per_s"),
            a.get("mfu_vs_989"),
            a.get("mfu_vs_measured"),
            a.get("error", a.get("skipped", "ok"))[:50],
        ]
        for a in results["attempts"]
    ]
    results["summary"] = {
        "by_seq": {  # the fastest configuration that ran at each length
            s: {
                "tokens_per_s": a["tokens_per_s"],
                "mfu_vs_989": a["mfu_vs_989"],
                "config": {k: a[k] for k in ("attention", "batch", "micro_batches", "remat")},
            }
            for s, a in best.items()
        },
        "target_35pct_mfu": {s: a["mfu_vs_989"] >= 0.35 for s, a in best.items()},
        "table": f"PPO update ({results['settings']['model']}, actor + critic, AdamW, bf16 compute)\n"
        + table(
            rows,
            ["seq", "attn", "batch", "micro", "remat", "update s", "tok/s", "MFU/989", "MFU/meas", "status"],
        ),
    }
    results["wall_s"] = time.perf_counter() - start
    write_results("ppo_update", results, args.json)
    print(results["summary"]["table"])
    if not best:
        sys.exit("no configuration ran")


if __name__ == "__main__":
    main()
