"""Peak memory of research.rl's PPO update (actor, and actor + critic) at 0.5B-7B and 8K/32K tokens, as XLA
plans it, as measured on the device, and as ``models.memory_plan`` predicts it:

    python -m benchmarks.models.peak_memory --out /tmp/peak.json                # compile only (planned peak)
    python -m benchmarks.models.peak_memory --run --out /tmp/peak.json          # GPU: also run what fits
    python -m benchmarks.models.peak_memory --models 7b --seqs 32768 --remat full
    python -m benchmarks.models.peak_memory --smoke --out /tmp/peak.json        # CPU, tiny shapes, ~1 min

Every case (model, seq, learner, remat) runs in a subprocess of its own (a per-case timeout; a crash, OOM or
hang loses nothing of the others, whose results are written as they finish), so XLA's allocator starts clean.

The update compiled is the learner's own program: ``research.rl.jitted_updates`` (what ``Learner``
compiles) bound to the models' graphdefs, the AdamW optimizers of ``research.rl.make_optimizer`` and a
``LearnerConfig``, without a mesh. ``Learner`` itself cannot be built on abstract arrays (it reads every state
leaf's ``.sharding``), so the case lowers those programs on abstract arguments: the state (``TrainState``:
fp32 parameters, AdamW moments, step, RNG) comes from
``jax.eval_shape`` over ``models.abstract_model`` (no weights are allocated) and the prepared batch (one
micro-batch, ``--batch`` rows of ``seq`` tokens, 90% policy tokens) from ``jax.eval_shape`` of the learner's
``prepare``. Actor-only is the learner without a critic (the ``grpo`` estimator, which needs none);
actor + critic uses ``gae``. One micro-batch: no accumulation (one gradient tree; ``accumulate=False`` in
the plan).

planned peak = argument_size + output_size - alias_size + temp_size  (``compiled.memory_analysis()``:
arguments are the state and batch, outputs alias the donated state, temp is XLA's scratch for the program).

``--run`` (where the planned peak fits ``memory_stats()['bytes_limit']``, i.e. ``--mem-fraction`` of the GPU,
default 0.95) also builds random weights, runs
``prepare`` and one update, and reads ``peak_bytes_in_use`` after each (the process maximum: the update's
peak is the figure when it exceeds prepare's; on CPU, which keeps no memory stats, it runs unmeasured).
``--attention xla`` and ``--remat`` override the shape's (XLA attention compiles the real shapes on CPU,
though XLA's CPU plan is no guide to the GPU's). ``predicted`` is ``models.memory_plan`` for the same
settings (devices=1, no rollout); the ratios compare the state (arguments vs params + optimizer) and the
update's working memory (temp vs the learner phase) separately as well as in total.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common.jax_bench import table
from benchmarks._common.shapes import model_shape, tiny_arch
from benchmarks._results import ROOT, write_results
from benchmarks.models.ppo_update import synthetic_batch

GiB = 1024**3
DEVICE_GIB = 130.0  # of an H200's ~139 GiB usable (benchmarks.models.memory_plan's margin)
LEARNERS = ("actor", "actor+critic")
SMOKE_SEQS = (64, 128)


def model_config(name: str, seq: int, remat: str | None, smoke: bool, attention: str | None = None):
    """The ``models.ModelConfig`` of a case: a conf/model shape (fp32 params, bf16 compute, its attention
    and remat) or, with ``smoke``, a tiny one with XLA attention (CPU); ``remat`` / ``attention`` override."""

    if smoke:
        cfg = tiny_arch().replace(param_dtype="float32", compute_dtype="bfloat16", attention_impl="xla")
    else:
        cfg = model_shape(name)
    cfg = cfg.replace(max_position_embeddings=max(seq, cfg.max_position_embeddings))
    cfg = cfg.replace(remat=remat) if remat else cfg
    return cfg.replace(attention_impl=attention) if attention else cfg


def build_step(cfg, critic: bool, chunk: int):
    """(update, prepare, make_state, abstract_state): the learner's jitted ``ppo_update`` and ``prepare``
    (``research.rl.jitted_updates``, no mesh) and the state, abstract (no memory)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    import models
    from research import rl

    lcfg = rl.LearnerConfig(
        micro_batches=1,
        chunk_size=chunk,
        advantage=rl.AdvantageConfig(estimator="gae" if critic else "grpo"),
    )
    actor_def, actor_abs = nnx.split(models.abstract_model(cfg))
    critic_def, critic_abs = nnx.split(models.abstract_model(cfg, models.Critic)) if critic else (None, None)
    actor_tx, critic_tx = rl.make_optimizer(lcfg.actor), rl.make_optimizer(lcfg.critic)

    def make_state(actor_p, critic_p):
        return rl.TrainState(
            actor=actor_p,
            critic=critic_p,
            actor_opt=actor_tx.init(actor_p),
            critic_opt=None if critic_p is None else critic_tx.init(critic_p),
            step=jnp.zeros((), jnp.int32),
            rng=jax.random.key(lcfg.seed),
        )

    programs = rl.jitted_updates(lcfg, actor_def, critic_def, None, actor_tx, critic_tx)
    update, prepare = programs["ppo"], programs["prepare"]
    return update, prepare, make_state, jax.eval_shape(make_state, actor_abs, critic_abs)


def planned_peak(compiled) -> dict:
    """XLA's memory analysis of a compiled program and its planned peak (argument + output - alias + temp:
    donated arguments that outputs alias are counted once)."""
    m = compiled.memory_analysis()
    out = {
        k: int(getattr(m, f"{k}_size_in_bytes"))
        for k in ("argument", "output", "alias", "temp", "generated_code")
    }
    out["planned"] = out["argument"] + out["output"] - out["alias"] + out["temp"]
    return out


def predicted(cfg, critic: bool, tokens: int, seq: int, chunk: int) -> dict:
    """``models.memory_plan`` of the same learner on one device (one micro-batch: no accumulation)."""
    import models

    settings = models.MemorySettings(
        micro_batch_tokens=tokens, seq_len=seq, chunk_size=chunk, critic=critic, accumulate=False, devices=1
    )
    plan = models.memory_plan(cfg, settings)
    return {
        "components": plan.components,
        "resident": plan.resident,
        "learner_peak": plan.learner_peak,
        "total": plan.total,
    }


def run_case(case: dict, part: Path | None = None) -> dict:
    """One case, in this process: compile (planned), predict, and with ``case['run']`` run it. The result so
    far is written to ``part`` before the run, so an OOM or crash of the run keeps the plan."""
    import jax


    t = time.perf_counter()
    critic = case["learner"] == "actor+critic"
    cfg = model_config(case["model"], case["seq"], case["remat"], case["smoke"], case["attention"])
    out: dict = {"remat": cfg.remat, "attention": cfg.attention_impl, "device": str(jax.devices()[0])}
    update, prepare, make_state, state_abs = build_step(cfg, critic, case["chunk"])
    arrays = synthetic_batch(cfg, case["batch"], case["seq"])  # ppo_update's batch: 90% policy tokens
    batch_abs = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), arrays)
    prepared_abs, _ = jax.eval_shape(prepare, state_abs, batch_abs, None)
    out["memory"] = planned_peak(update.lower(state_abs, prepared_abs).compile())
    out["compile_s"] = time.perf_counter() - t
    tokens = case["batch"] * case["seq"]
    out["predicted"] = predicted(cfg, critic, tokens, case["seq"], case["chunk"])
    if part is not None:
        part.write_text(json.dumps(out))
    if not case["run"]:
        return out
    peak = lambda: (jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use")  # None on CPU
    limit = (jax.devices()[0].memory_stats() or {}).get("bytes_limit")
    if limit is not None and out["memory"]["planned"] > limit:
        out["run_skipped"] = f"planned peak > bytes_limit ({limit / GiB:.1f} GiB)"
        return out
    out["bytes_limit"] = limit
    try:
        _run(out, cfg, critic, arrays, prepare, update, make_state, peak)
    except Exception as exc:  # an OOM at run time: the planned figures stay
        out["run_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
    out["run_s"] = time.perf_counter() - t - out["compile_s"]
    return out


def _run(out, cfg, critic, arrays, prepare, update, make_state, peak):
    """Random weights, ``prepare`` and one update; ``peak_bytes_in_use`` after each into ``out``."""
    import jax
    from flax import nnx

    import models

    actor_p = nnx.split(models.init_model(cfg, seed=0))[1]
    critic_p = nnx.split(models.init_model(cfg, seed=1, cls=models.Critic))[1] if critic else None
    state = jax.jit(make_state)(actor_p, critic_p)  # moments: fresh arrays; parameters: the same buffers
    del actor_p, critic_p
    batch = jax.tree.map(jax.numpy.asarray, arrays)
    jax.block_until_ready(state)
    out["peak_bytes_init"] = peak()
    prepared, _ = prepare(state, batch, None)
    jax.block_until_ready(prepared)
    out["peak_bytes_prepare"] = peak()
    state, metrics = update(state, prepared)
    out["metrics"] = {k: float(v) for k, v in jax.device_get(metrics).items()}
    out["peak_bytes"] = peak()


def _error_line(stderr: str) -> str:
    """The exception's line of a traceback (JAX appends notes after it), else the last line."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b", ln)]
    return (errors or lines or ["no output"])[-1][:400]


def _spawn(case: dict, timeout: float, mem_fraction: float) -> dict:
    """``run_case`` in a fresh interpreter. A crash or timeout is one error line (the last of stderr); one
    after the plan was written keeps the plan, as ``run_error``."""
    env = {**os.environ, "XLA_PYTHON_CLIENT_MEM_FRACTION": str(mem_fraction)}
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "case.json"
        cmd = [sys.executable, "-m", "benchmarks.models.peak_memory", "--case", json.dumps(case)]
        cmd += ["--part", str(part)]
        try:
            proc = subprocess.run(
                cmd, timeout=max(timeout, 5), cwd=ROOT, env=env, capture_output=True, text=True
            )
            error = None if proc.returncode == 0 else f"rc={proc.returncode}: {_error_line(proc.stderr)}"
        except subprocess.TimeoutExpired:
            error = f"timed out after {max(timeout, 5):.0f}s"
        done = json.loads(part.read_text()) if part.is_file() else {}
    if error:
        done["run_error" if done else "error"] = error
    return done


def _ratios(r: dict) -> dict:
    mem, pred = r["memory"], r["predicted"]
    out = {
        "planned_over_predicted": mem["planned"] / pred["total"],
        # the state and batch (arguments) vs parameters + moments; the update's scratch vs the learner phase
        "arguments_over_resident": mem["argument"] / pred["resident"],
        "temp_over_learner_peak": mem["temp"] / pred["learner_peak"],
    }
    if r.get("peak_bytes"):
        out["measured_over_predicted"] = r["peak_bytes"] / pred["total"]
        out["measured_over_planned"] = r["peak_bytes"] / mem["planned"]
    return out


def _row(r: dict, device_gib: float) -> list:
    mem = r.get("memory")
    status = r.get("error") or r.get("skipped") or r.get("run_error") or r.get("run_skipped") or "ok"
    if not mem:
        return [r["model"], r["seq"], r["learner"], r.get("remat"), None, None, None, None, None, status[:60]]
    gib = lambda b: None if b is None else b / GiB
    ratio = r["ratios"].get("measured_over_predicted", r["ratios"]["planned_over_predicted"])
    fits = "yes" if max(mem["planned"], r.get("peak_bytes") or 0) <= device_gib * GiB else "NO"
    return [
        r["model"],
        r["seq"],
        r["learner"],
        r["remat"],
        gib(mem["planned"]),
        gib(r.get("peak_bytes")),
        gib(r["predicted"]["total"]),
        ratio,
        fits,
        status[:60],
    ]


def _die(message: str):
    print(f"peak_memory: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="0.5b,1.5b,3b,7b", help="comma list of benchmarks._common.shapes")
    ap.add_argument("--seqs", default="8192,32768", help="comma list of sequence lengths")
    ap.add_argument("--remat", default=None, help="remat policy (default: the shape's)")
    ap.add_argument("--attention", default=None, help="attention_impl, e.g. xla (default: the shape's)")
    ap.add_argument("--batch", type=int, default=1, help="rows of seq tokens in the one micro-batch")
    ap.add_argument("--chunk", type=int, default=None, help="log-prob chunk (default: LearnerConfig's)")
    ap.add_argument("--run", action="store_true", help="also run what fits and measure peak_bytes_in_use")
    ap.add_argument("--smoke", action="store_true", help="CPU: tiny shapes, seqs 64,128")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default runs/benchmarks/)")
    ap.add_argument("--budget-s", type=float, default=3000.0, help="total wall time of all cases")
    ap.add_argument("--case-timeout", type=float, default=600.0)
    ap.add_argument(
        "--mem-fraction",
        type=float,
        default=float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", 0.95)),
        help="share of the GPU each case's JAX may take (its bytes_limit; JAX's own default is 0.75)",
    )
    ap.add_argument("--device-gib", type=float, default=DEVICE_GIB)
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one case, in a subprocess
    ap.add_argument("--part", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        args.seqs = list(SMOKE_SEQS) if args.smoke else [int(s) for s in args.seqs.split(",")]
    except ValueError:
        _die(f"--seqs must be integers, got {args.seqs!r}")
    args.models = ["tiny"] if args.smoke else [m.strip() for m in args.models.split(",") if m.strip()]
    if args.chunk is None:
        from research.rl import LearnerConfig

        args.chunk = 32 if args.smoke else LearnerConfig().chunk_size
    if args.batch < 1 or args.chunk < 1 or min(args.seqs) < 2 or not 0 < args.mem_fraction <= 1:
        _die("--batch and --chunk must be >= 1, every seq >= 2 and --mem-fraction in (0, 1]")
    return args


def main(argv=None) -> dict | None:
    args = parse_args(argv)
    if args.case is not None:  # the subprocess of one case: its result to --part
        args.part.write_text(json.dumps(run_case(json.loads(args.case), args.part)))
        return None
    for model in args.models:  # a wrong shape, remat or attention: one line, before any case runs
        try:
            model_config(model, max(args.seqs), args.remat, args.smoke, args.attention)
        except (SystemExit, ValueError) as exc:
            _die(str(exc).replace("error: ", ""))
    start = time.perf_counter()
    results: dict = {
        "benchmark": "peak_memory",
        "settings": {
            "batch": args.batch,
            "micro_batches": 1,
            "chunk": args.chunk,
            "remat": args.remat or "shape default",
            "attention": args.attention or "shape default",
            "run": args.run,
            "smoke": args.smoke,
            "device_gib": args.device_gib,
            "mem_fraction": args.mem_fraction,
            "planned_formula": "argument + output - alias + temp (compiled.memory_analysis())",
        },
        "cases": [],
    }
    for model in args.models:
        for seq in args.seqs:
            for learner in LEARNERS:
                case = dict(model=model, seq=seq, learner=learner, remat=args.remat, attention=args.attention)
                case["batch"] = args.batch
                case.update(chunk=args.chunk, run=args.run, smoke=args.smoke)
                left = args.budget_s - (time.perf_counter() - start)
                if left < 5:
                    r = {**case, "skipped": "budget"}
                else:
                    r = {**case, **_spawn(case, min(args.case_timeout, left), args.mem_fraction)}
                    if "memory" in r:
                        r["ratios"] = _ratios(r)
                results["cases"].append(r)
                print("[peak_memory] " + "  ".join(str(c) for c in _row(r, args.device_gib)), flush=True)
                write_results("peak_memory", results, args.out)
    rows = [_row(r, args.device_gib) for r in results["cases"]]
    header = ["model", "seq", "learner", "remat", "planned GiB", "measured GiB", "predicted GiB"]
    header += ["ratio", f"fits {args.device_gib:g}?", "status"]
    results["table"] = table(rows, header)
    results["wall_s"] = time.perf_counter() - start
    write_results("peak_memory", results, args.out)
    print("ratio: measured / predicted where measured, else planned / predicted\n" + results["table"])
    return results


if __name__ == "__main__":
    main()
