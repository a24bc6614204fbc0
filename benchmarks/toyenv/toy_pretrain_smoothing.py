"""What grammar-aware smoothing does to the pretrained toy policy (issue 14): for each smoothing mass, the
demo's pretraining (``research.rl.pipeline.demo.demo_pipeline``), then plans sampled at temperature 1 on the
demo's train and test tasks (the warm-up's exploration) and greedy ones (the evaluation's): the share that is
not a plan the task renders, the share using each optimisation absent from the corpus, and the mean
probability of fusing the next op where a kernel's first op has been written. No judge: this is about what
RL can sample, not what it is worth (``toy_plan_speeds.py``).

    python -m benchmarks.toyenv.toy_pretrain_smoothing --smoothing 0,0.1,0.3 --out smoothing.json  # GPU
    python -m benchmarks.toyenv.toy_pretrain_smoothing --smoothing 0.3 --detour-rates 0,0.3 --out d.json
    python -m benchmarks.toyenv.toy_pretrain_smoothing --smoothing 0.3 --steps 2 --corpus-tasks 48
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._results import env_info, write_results

ROOT = Path(__file__).resolve().parents[2]


def _measure(
    eps: float, steps: int | None, samples: int, work: Path, n_corpus: int | None = None, detour: float = 0.0
) -> dict:
    import jax

    import models
    from research.rl.pipeline.demo import demo_pipeline
    from research.rl.pipeline.pretrain import pretrain
    from research.rl.pipeline.runtime import build_policy
    from research.rollout import RolloutConfig
    from research.toyenv import (
        baseline_plan,
        corpus_tasks,
        format_plan,
        make_tasks,
        optimisation_shares,
        render_plan,
        toy_tokenizer,
    )
    from research.toyenv.rollout import make_sampler

    cfg = demo_pipeline(str(work), "cache.jsonl")
    pc = dataclasses.replace(
        cfg.pretrain,
        grammar_smoothing=eps,
        detour_rate=detour,
        steps=steps or cfg.pretrain.steps,
        num_corpus_tasks=n_corpus or cfg.pretrain.num_corpus_tasks,
    )
    tok = toy_tokenizer()
    taskset = make_tasks(cfg.tasks)
    held = taskset.split("test") + taskset.split("heldout_category")
    t0 = time.perf_counter()
    model = build_policy(cfg.model, len(tok))
    model, last = pretrain(
        model, corpus_tasks(cfg.tasks, pc.num_corpus_tasks, avoid=held), pc,
        work / f"pretrain_{eps}_{detour}", corpus=cfg.corpus, tokenizer=tok, progress=False,
    )  # fmt: skip
    out = {
        "smoothing": eps,
        "detour_rate": detour,
        "pretrain_s": time.perf_counter() - t0,
        "pretrain": last,
        "splits": {},
    }
    ro = RolloutConfig(turns=1, episodes=32, group_size=4, max_context=96)
    sampler = make_sampler(model, ro)
    for split in ("train", "test", "heldout_category"):
        tasks = taskset.split(split)
        res: dict = {"tasks": len(tasks)}
        for mode, temp, n in (("sampled", 1.0, samples), ("greedy", 0.0, len(tasks))):
            plans, errors = [], collections.Counter()
            for start in range(0, n, 32):
                batch = [tasks[(start + i) % len(tasks)] for i in range(min(32, n - start))]
                pad = batch + [batch[0]] * (32 - len(batch))
                sc = models.SamplingConfig(max_new_tokens=32, temperature=temp, eos_token_ids=(tok.eos_id,))
                gen = sampler.generate([tok.encode_prompt(t) for t in pad], sc, seed=start)
                for r, t in enumerate(batch):
                    try:
                        plan = tok.decode_plan(gen.response_ids(r))
                        render_plan(t, plan)
                        plans.append(plan)
                    except Exception as exc:  # any reason it is not a plan for the task
                        errors[str(exc).split(":")[-1].strip()[:60]] += 1
            shares = optimisation_shares(plans)
            res[mode] = {
                "n": n,
                "invalid": 1 - len(plans) / n,
                # of all samples, valid ones using each (the shares below are of the valid plans)
                "valid_using": {k: v * len(plans) / n for k, v in shares.items()},
                "errors": dict(errors.most_common(5)),
                "optimisations": shares,
            }
        probs = []  # P(next op | "<bos> task <sep> K op0"): fusing the first two ops
        for t in (t for t in tasks if len(t.ops) > 1):
            ctx = tok.encode_prompt(t) + tok.encode(format_plan(baseline_plan(t))[:2])
            logp = jax.nn.log_softmax(model(np.asarray([ctx]))[0, -1])
            probs.append(float(np.exp(logp[tok.encode([t.ops[1]])[0]])))
        res["p_fuse_first_pair"] = float(np.mean(probs)) if probs else None
        out["splits"][split] = res
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoothing", default="0,0.1,0.3", help="comma-separated grammar_smoothing values")
    p.add_argument("--detour-rates", default="0", help="comma-separated detour rates (each smoothing value)")
    p.add_argument("--steps", type=int, default=None, help="pretraining steps (default: the demo's)")
    p.add_argument("--samples", type=int, default=256, help="sampled plans per split")
    p.add_argument("--corpus-tasks", type=int, default=None, help="corpus tasks (default: the demo's)")
    p.add_argument("--work", default="/tmp/toy_pretrain_smoothing")
    p.add_argument("--out", default=None, help="results JSON (default: runs/benchmarks/)")
    a = p.parse_args(argv)
    rows = []
    grid = [(float(e), float(d)) for e in a.smoothing.split(",") for d in a.detour_rates.split(",")]
    for eps, det in grid:
        rows.append(_measure(eps, a.steps, a.samples, Path(a.work), a.corpus_tasks, det))
        s = rows[-1]["splits"]["test"]
        print(
            f"smoothing {eps} detours {det}: pretrain {rows[-1]['pretrain_s']:.0f} s, val_nll "
            f"{rows[-1]['pretrain'].get('val_nll', float('nan')):.3f}; test sampled invalid "
            f"{s['sampled']['invalid']:.1%}, valid and fusing "
            f"{s['sampled']['valid_using']['fusion']:.1%}, any {s['sampled']['valid_using']['any']:.1%}; "
            f"greedy any {s['greedy']['optimisations']['any']:.1%}; "
            f"P(fuse) {s['p_fuse_first_pair']:.3f}",
            flush=True,
        )
        record = {"env": env_info(), "command": " ".join(sys.argv), "rows": rows}
        write_results("toy_pretrain_smoothing", record, a.out)


if __name__ == "__main__":
    main()
