"""Agentic rollout throughput: models.Engine (continuous batching, prefix sharing, paged KV) vs the lockstep
models.Sampler path the agent batcher uses today, on the same weights and workload, in one run.

Workload: ``--tasks`` task prompts, ``--k`` sampled episodes each; an episode runs 1..``--max-turns`` turns
(drawn per episode), each turn generating up to its own budget (drawn in [max_new/4, max_new]) or until one
of 16 EOS ids, then appending an observation of 1..``--obs-len`` tokens and continuing from the kept KV cache.
Modes (all with ``--slots`` concurrent sequences):
  sampler_lockstep   rounds of Sampler.generate over every live episode's next turn (batches of ``slots``,
                     continuing from kept caches): a batch runs to its largest budget (tokens past a row's own
                     budget are not counted) and waits for its slowest row;
  engine_lockstep    Engine admitting only when every slot is free (no prefix sharing);
  engine_continuous  Engine refilling slots as soon as a turn finishes (no prefix sharing);
  engine_full        continuous batching + prefix sharing of the k samples' task prompt.
Each mode runs the workload once to compile and once timed. Tokens/s = counted generated tokens / wall time
of the timed pass (prefill, host work and tool-free observation appends included); occupancy = mean fraction
of the ``slots`` sequences doing useful work per decode step.

    python -m benchmarks.models.rollout_engine                     # GPU (runs/benchmarks/rollout_engine.json)
    python -m benchmarks.models.rollout_engine --model 1.5b --budget-s 240   # a Qwen2.5-1.5B shape
    python -m benchmarks.models.rollout_engine --smoke --out /tmp/re.json  # CPU, tiny random model
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks._common.shapes import add_model_arg, shape_arch
from benchmarks._results import env_info, write_results

# the engine's full configuration first, the lockstep sampler (today's path, the baseline) next: a run cut
# short by its budget still has the comparison that matters
MODES = ("engine_full", "sampler_lockstep", "engine_continuous", "engine_lockstep")
N_EOS = 16


def workload(args, vocab: int) -> list[dict]:
    rng = np.random.default_rng(args.seed)
    tasks = [
        rng.integers(N_EOS, vocab, rng.integers(args.prompt_len // 2, args.prompt_len + 1)).tolist()
        for _ in range(args.tasks)
    ]
    episodes = []
    for t, prompt in enumerate(tasks):
        for j in range(args.k):
            turns = int(rng.integers(1, args.max_turns + 1))
            episodes.append(
                {
                    "task": t,
                    "prompt": prompt,
                    "seed": 1000 * t + j,
                    "budgets": rng.integers(max(1, args.max_new // 4), args.max_new + 1, turns).tolist(),
                    "obs": [
                        rng.integers(N_EOS, vocab, rng.integers(1, args.obs_len + 1)).tolist()
                        for _ in range(turns)
                    ],
                }
            )
    return episodes


def run_engine(engine, episodes, args, *, continuous: bool, sharing: bool) -> dict:
    import jax

    import models

    engine.set_scheduling(continuous=continuous, prefix_sharing=sharing)
    engine.reset_stats()
    t0 = time.perf_counter()
    ctx = [list(e["prompt"]) for e in episodes]
    turn = [0] * len(episodes)
    owner = {}

    def submit(i, parent):
        e = episodes[i]
        cfg = models.SamplingConfig(
            max_new_tokens=e["budgets"][turn[i]], temperature=1.0, eos_token_ids=tuple(range(N_EOS))
        )
        last = turn[i] == len(e["budgets"]) - 1
        key = jax.random.fold_in(jax.random.key(e["seed"]), turn[i])
        owner[engine.submit(models.Request(ctx[i], cfg, key=key, parent=parent, keep_cache=not last))] = i

    for i in range(len(episodes)):
        submit(i, None)
    generated = 0
    while engine.busy:
        for res in engine.step():
            i = owner.pop(res.id)
            generated += len(res.response_ids)
            engine.results.pop(res.id)
            ctx[i] += res.response_ids + episodes[i]["obs"][turn[i]]
            turn[i] += 1
            if turn[i] < len(episodes[i]["budgets"]):
                submit(i, res.id)
    wall = time.perf_counter() - t0
    s = engine.stats
    return {
        "generated_tokens": generated,
        "wall_s": wall,
        "tokens_per_s": generated / wall,
        "occupancy": s["occupancy"],
        "prefill_tokens": s["prefill_tokens"],
        "prefill_saved_sharing": s["prefill_saved_sharing"],
        "prefill_saved_continuation": s["prefill_saved_continuation"],
        "decode_steps": s["decode_steps"],
    }


def run_sampler(sampler, episodes, args) -> dict:
    import models

    t0 = time.perf_counter()
    ctx = [list(e["prompt"]) for e in episodes]
    caches = [None] * len(episodes)
    turn = [0] * len(episodes)
    generated = useful_slot_steps = steps = prefill = 0
    rnd = 0
    while live := [i for i, e in enumerate(episodes) if turn[i] < len(e["budgets"])]:
        for b in range(0, len(live), args.slots):
            rows = live[b : b + args.slots]
            budgets = [episodes[i]["budgets"][turn[i]] for i in rows]
            cfg = models.SamplingConfig(
                max_new_tokens=max(budgets), temperature=1.0, eos_token_ids=tuple(range(N_EOS))
            )
            row_caches = [caches[i] for i in rows]
            out = sampler.generate(
                [ctx[i] for i in rows],
                cfg,
                seed=rnd * 997 + b,
                caches=row_caches if any(c is not None for c in row_caches) else None,
                keep_cache=True,
            )
            steps += out.stats["steps"]
            prefill += out.stats["new_tokens"]
            for r, i in enumerate(rows):
                useful = min(int(out.lengths[r]), budgets[r])
                generated += useful
                useful_slot_steps += useful
                ctx[i] += out.response_ids(r) + episodes[i]["obs"][turn[i]]
                caches[i] = out.caches[r]
                turn[i] += 1
        rnd += 1
    wall = time.perf_counter() - t0
    return {
        "generated_tokens": generated,
        "wall_s": wall,
        "tokens_per_s": generated / wall,
        "occupancy": useful_slot_steps / (steps * args.slots) if steps else 0.0,
        "prefill_tokens": prefill,
        "decode_steps": steps,
    }


def build(args):
    import jax

    import models

    if args.smoke:
        cfg = models.tiny_config(
            num_layers=2,
            hidden_size=64,
            head_dim=16,
            intermediate_size=128,
            vocab_size=1024,
            compute_dtype="float32",
            initializer_range=0.02,
        )
    else:
        cfg = shape_arch(args.model).replace(compute_dtype="bfloat16", param_dtype="bfloat16")
    model = models.init_model(cfg, seed=0)
    need = args.prompt_len + args.max_turns * (args.max_new + args.obs_len)
    ecfg = models.EngineConfig(
        num_slots=args.slots,
        page_size=args.page_size,
        kv_budget_tokens=args.kv_budget or args.slots * need,
        max_seq_len=need,
        segment_steps=args.segment,
    )
    sampler = models.Sampler(model, batch_buckets=tuple(sorted({1, 2, 4, 8, 16, 32, 64, args.slots})))
    return cfg, models.Engine(model, ecfg), sampler, jax.devices()[0].device_kind


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="CPU: tiny random model, small workload")
    p.add_argument("--tasks", type=int, default=16)
    p.add_argument("--k", type=int, default=8, help="samples (episodes) per task")
    p.add_argument("--max-turns", type=int, default=4)
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--obs-len", type=int, default=128)
    p.add_argument("--max-new", type=int, default=256)
    p.add_argument("--slots", type=int, default=32)
    p.add_argument("--page-size", type=int, default=16)
    p.add_argument(
        "--kv-budget", type=int, default=0, help="KV budget in tokens (0: every slot at full length)"
    )
    p.add_argument("--segment", type=int, default=16, help="decode steps per engine step")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=0.0, help="no mode starts after this (s; 0: none)")
    add_model_arg(p)
    p.add_argument("--out", default=None, help="results JSON (default: runs/benchmarks/)")
    args = p.parse_args(argv)
    if args.smoke:
        args.tasks, args.k, args.max_turns, args.prompt_len = 2, 3, 2, 24
        args.obs_len, args.max_new, args.slots, args.segment = 6, 12, 4, 4
    modes = args.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad:
        print(f"error: unknown mode(s) {bad}; choose from {MODES}", file=sys.stderr)
        sys.exit(2)
    t0 = time.perf_counter()
    cfg, engine, sampler, device = build(args)
    episodes = workload(args, cfg.vocab_size)
    print(f"[rollout] built in {time.perf_counter() - t0:.1f} s: {len(episodes)} episodes, "
          f"{sum(len(e['budgets']) for e in episodes)} turns", flush=True)
    results: dict = {}
    record = {
        "smoke": args.smoke,
        "environment": env_info(),
        "device": device,
        "workload": {k: v for k, v in vars(args).items() if k not in ("out", "modes")},
        "episodes": len(episodes),
        "turns": sum(len(e["budgets"]) for e in episodes),
        "results": results,
    }
    for mode in modes:
        if args.budget_s and time.perf_counter() - t0 > args.budget_s:
            results[mode] = {"skipped": "budget"}
            continue
        if mode == "sampler_lockstep":
            fn = lambda: run_sampler(sampler, episodes, args)
        else:
            flags = {
                "engine_lockstep": (False, False),
                "engine_continuous": (True, False),
                "engine_full": (True, True),
            }
            c, s = flags[mode]
            fn = lambda c=c, s=s: run_engine(engine, episodes, args, continuous=c, sharing=s)
        t = time.perf_counter()
        fn()  # compile
        print(f"[rollout] {mode}: compile pass {time.perf_counter() - t:.1f} s", flush=True)
        results[mode] = r = fn()
        print(
            f"{mode:18s} {r['tokens_per_s']:10.1f} tok/s  occupancy {r['occupancy']:.2f}  "
            f"prefill {r['prefill_tokens']}",
            flush=True,
        )
        base = results.get("sampler_lockstep")
        if base:
            for r in results.values():
                if "tokens_per_s" in r:
                    r["speedup_vs_sampler"] = r["tokens_per_s"] / base["tokens_per_s"]
        write_results("rollout_engine", record, args.out)  # per mode: a timeout keeps the finished ones
    write_results("rollout_engine", record, args.out)
    return record


if __name__ == "__main__":
    main()
