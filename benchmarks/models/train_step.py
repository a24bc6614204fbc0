"""Training-step throughput and model-FLOPs utilisation of the models package.

    python -m benchmarks.models.train_step --json /tmp/train.json          # GPU: Qwen2.5-0.5B shape, seq 4096
    python -m benchmarks.models.train_step --model 1.5b --seq 8192 --json /tmp/train.json   # GPU: 1.5B shape
    python -m benchmarks.models.train_step --tiny --json /tmp/train.json   # CPU smoke test

One step = forward, backward and an Optax AdamW update (fp32 master weights and moments, bf16 compute,
cuDNN fused attention, chunked next-token log-probs so [B, T, V] fp32 logits never exist), jitted with
donated state, on random tokens. The bf16 matmul rate is measured in the same process.

Model FLOPs per step (stated): 6 * N * tokens + 6 * L * T * (heads * head_dim) * tokens, where N counts every
parameter once (the tied embedding is the lm-head matmul) and the second term is causal attention (QK^T and
PV over T/2 keys on average, forward + backward). PaLM's convention (12 * L * T * d, non-causal) is reported
too. MFU = model FLOPs / step time / measured bf16 matmul rate.

Configurations are tried in order (attention, batch, remat) until one fits and runs within the budget:
``--plan``, else GPU_PLAN for the 0.5B shape at seq 4096, else one derived from ``models.memory_plan``
(``benchmarks/models/_plans.py``: ~32K tokens per step, remat from the lightest that fits to "full").
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks._common.jax_bench import PEAK_BF16, jax_device_info, matmul_rate, table
from benchmarks._common.shapes import add_model_arg, bench_config
from benchmarks._results import env_info, write_results

GPU_PLAN = [("cudnn", 8, "none"), ("cudnn", 8, "save_attn"), ("cudnn", 4, "full"), ("xla", 1, "full")]
TINY_PLAN = [("xla", 2, "none"), ("xla", 2, "full")]


def base_config(args):
    """The model every attempt derives from (runtime fields set per attempt): the tiny smoke model with
    --tiny, else the --model shape's architecture (0.5b: ``models.qwen2_0_5b_config()``)."""
    return bench_config(args.model, args.tiny)


def attempt_config(base, attn: str, remat: str):
    return base.replace(param_dtype="float32", compute_dtype="bfloat16", attention_impl=attn, remat=remat)


def plan_for(args, base, seq: int) -> list[tuple[str, int, str]]:
    """(attention, batch, remat) attempts: --plan, the tiny plan, GPU_PLAN (0.5b at seq 4096) or the plan
    derived from models.memory_plan for this shape and length."""
    from benchmarks.models._plans import derived_plan, parse_plan

    if args.plan:
        return parse_plan(args.plan, 3)
    if args.tiny:
        return TINY_PLAN
    if args.model == "0.5b" and seq == 4096:
        return GPU_PLAN
    cfg = attempt_config(base, "cudnn", "none")
    derived = derived_plan(cfg, seq, chunk=args.chunk, critic=False, accumulate=False)
    return [(a, b, r) for a, b, _, r in derived]


def model_flops(cfg, batch: int, seq: int) -> dict:
    tokens = batch * seq
    n = cfg.num_params()
    d_attn = cfg.num_heads * cfg.head_dim
    dense = 6 * n * tokens
    attn_causal = 6 * cfg.num_layers * seq * d_attn * tokens
    return {
        "params": n,
        "tokens": tokens,
        "dense": dense,
        "attention_causal": attn_causal,
        "total": dense + attn_causal,
        "total_palm": dense + 2 * attn_causal,
    }


def run_config(cfg, batch: int, seq: int, steps: int, chunk: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import nnx

    import models

    t = time.perf_counter()
    model = models.init_model(cfg, seed=0)
    graphdef, params = nnx.split(model)
    del model
    tx = optax.adamw(learning_rate=1e-5, b1=0.9, b2=0.95, weight_decay=0.1)
    opt_state = jax.jit(tx.init)(params)
    tokens = jnp.asarray(np.random.RandomState(0).randint(0, cfg.vocab_size, (batch, seq)), jnp.int32)
    jax.block_until_ready((params, opt_state))
    init_s = time.perf_counter() - t

    def step(params, opt_state, tokens):
        def loss_fn(p):
            lp = models.token_logprobs(nnx.merge(graphdef, p), tokens, chunk_size=chunk)
            return -jnp.mean(lp)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    t = time.perf_counter()
    params, opt_state, loss = step(params, opt_state, tokens)
    first_loss = float(loss)
    compile_s = time.perf_counter() - t
    for _ in range(2):
        params, opt_state, loss = step(params, opt_state, tokens)
    jax.block_until_ready(loss)
    t = time.perf_counter()
    for _ in range(steps):
        params, opt_state, loss = step(params, opt_state, tokens)
    last_loss = float(loss)  # blocks
    step_s = (time.perf_counter() - t) / steps
    stats = jax.devices()[0].memory_stats() or {}
    if not (np.isfinite(first_loss) and np.isfinite(last_loss)):
        raise RuntimeError(f"non-finite loss {first_loss} -> {last_loss}")
    return {
        "init_s": init_s,
        "first_call_s_incl_compile": compile_s,
        "step_s": step_s,
        "loss_first": first_loss,
        "loss_last": last_loss,
        "peak_bytes": stats.get("peak_bytes_in_use"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test with tiny shapes")
    add_model_arg(ap)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=2048, help="tokens per log-prob chunk")
    ap.add_argument("--plan", type=str, default=None, help="e.g. 'cudnn:8:none,cudnn:4:full'")
    ap.add_argument("--budget-s", type=float, default=110.0)
    args = ap.parse_args()
    start = time.perf_counter()

    import jax

    seq = args.seq or (64 if args.tiny else 4096)
    base = base_config(args)
    plan = plan_for(args, base, seq)
    results: dict = {
        "benchmark": "train_step",
        "env": env_info(),
        "device": jax_device_info(),
        "settings": {
            "model": "tiny" if args.tiny else args.model,
            "params": base.num_params(),
            "plan": [list(x) for x in plan],
            "seq": seq,
            "steps": args.steps,
            "chunk": args.chunk,
            "tiny": args.tiny,
            "optimizer": "adamw(lr=1e-5, b1=0.9, b2=0.95, wd=0.1)",
            "param_dtype": "float32",
            "compute_dtype": "bfloat16",
        },
        "flops_formula": "6*N*tokens + 6*L*T*(heads*head_dim)*tokens (causal attention, fwd+bwd)",
        "attempts": [],
    }
    t = time.perf_counter()
    peak = matmul_rate(n=1024 if args.tiny else 8192, iters=3 if args.tiny else 10)
    results["matmul_bf16_flops"] = peak
    results["matmul_s"] = time.perf_counter() - t
    print(f"[train] measured bf16 matmul rate: {peak / 1e12:.1f} TFLOP/s", flush=True)
    # progressive writes: an outer timeout still leaves what was measured
    write_results("train_step", results, args.json)
    for attn, batch, remat in plan:
        if time.perf_counter() - start > args.budget_s:
            results["attempts"].append(
                {"attention": attn, "batch": batch, "remat": remat, "skipped": "budget"}
            )
            continue
        cfg = attempt_config(base, attn, remat)
        attempt: dict = {"attention": attn, "batch": batch, "remat": remat}
        try:
            attempt.update(run_config(cfg, batch, seq, args.steps, args.chunk))
        except Exception as exc:
            attempt["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
            print(f"[train] {attn}/{batch}/{remat} failed: {attempt['error'][:300]}", flush=True)
            results["attempts"].append(attempt)
            write_results("train_step", results, args.json)
            jax.clear_caches()
            continue
        flops = model_flops(cfg, batch, seq)
        attempt.update(
            flops=flops,
            tokens_per_s=flops["tokens"] / attempt["step_s"],
            model_tflops_per_s=flops["total"] / attempt["step_s"] / 1e12,
            mfu=flops["total"] / attempt["step_s"] / peak,
            mfu_vs_989=flops["total"] / attempt["step_s"] / PEAK_BF16,
            mfu_6n_only=flops["dense"] / attempt["step_s"] / peak,
            mfu_palm=flops["total_palm"] / attempt["step_s"] / peak,
        )
        results["attempts"].append(attempt)
        print(
            f"[train] {attn}/{batch}/{remat}: {attempt['step_s'] * 1e3:.1f} ms/step, "
            f"{attempt['tokens_per_s']:.0f} tok/s, MFU {attempt['mfu']:.1%} of measured matmul, "
            f"{attempt['mfu_vs_989']:.1%} of 989 TFLOP/s",
            flush=True,
        )
        results["best"] = attempt
        break
    best = results.get("best")
    rows = [
        [
            a["attention"],
            a["batch"],
            a["remat"],
            a.get("step_s"),
            a.get("tokens_per_s"),
            a.get("mfu"),
            a.get("mfu_vs_989"),
            a.get("mfu_palm"),
            a.get("error", a.get("skipped", "ok"))[:60],
        ]
        for a in results["attempts"]
    ]
    results["summary"] = {
        "tokens_per_s": best and best["tokens_per_s"],
        "mfu": best and best["mfu"],
        "target_40pct_mfu": None if not best else best["mfu"] >= 0.40,
        "table": (
            f"train step ({results['settings']['model']}, seq {seq}, AdamW, bf16 compute; "
            f"bf16 matmul {peak / 1e12:.1f} TFLOP/s measured)\n"
            + table(
                rows, ["attn", "batch", "remat", "step s", "tok/s", "MFU", "MFU/989", "MFU(PaLM)", "status"]
            )
        ),
    }
    results["wall_s"] = time.perf_counter() - start
    write_results("train_step", results, args.json)
    print(results["summary"]["table"])


if __name__ == "__main__":
    main()
