"""The phases of ``benchmarks.models.decode_throughput`` (its docstring says what each measures), each run in
a subprocess of its own: the shapes, our configurations, the transformers checkpoint build, our sampler's
timed generation with its checks and profile, and the transformers peer."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._common.jax_bench import copy_bandwidth, hlo_loop_stats, jax_device_info, trace_kernel_summary
from benchmarks._common.shapes import shape_arch
from benchmarks._results import write_json

# The shapes as transformers configs: the peer builds its model from them, we load that checkpoint.
TINY_OVERRIDES = dict(
    vocab_size=1024,
    hidden_size=64,
    intermediate_size=128,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    max_position_embeddings=1024,
    eos_token_ids=(0,),
    pad_token_id=0,
)


def base_config(args):
    """The measured model's config: the --model shape's architecture (0.5b: ``models.qwen2_0_5b_config()``),
    or with --tiny a tiny model of the same family (--model ignored)."""
    from models import qwen2_0_5b_config

    return qwen2_0_5b_config(**TINY_OVERRIDES) if args.tiny else shape_arch(args.model)


def hf_shape(args) -> dict:
    """``base_config(args)`` as a transformers config (the peer builds from it, we load that checkpoint)."""
    from models import config_to_hf

    return config_to_hf(base_config(args))


# Our configurations: name -> (DecodeConfig overrides of the library default, prefill attention or None for
# --attention). "default" is what models.Sampler does out of the box (on this GPU: fused q/k/v, the fused
# RoPE + cache + attention kernel, the whole loop one CUDA graph); each other one changes one thing (baseline:
# the decode program of the first GPU run, 2026-11-30). Ordered by what the sweep most needs.
CONFIGS = {
    "default": ({}, None),
    "baseline": (dict(fused_qkv=False, attention="xla", command_buffers="default"), "xla"),
    "xla_attention": (dict(attention="xla"), None),
    "pallas_attention": (dict(attention="pallas"), None),
    "no_while_graph": (dict(command_buffers="default"), None),
    "xla_prefill": ({}, "xla"),
    "unroll2": (dict(steps_per_iteration=2), None),
    "no_graphs": (dict(command_buffers="off"), None),
}


def _prompts(batch: int, length: int, vocab: int):
    import numpy as np

    return np.random.RandomState(batch).randint(0, vocab, (batch, length))


# transformers' compiled generate settles (CUDA graph capture, recompiles) over its first calls
PEER_MIN_WARMUP = 3


# --- phases (run in subprocesses) -----------------------------------------------------------------------


def phase_build(args) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = hf_shape(args)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    t = time.perf_counter()
    with torch.device(device):
        model = Qwen2ForCausalLM(Qwen2Config(**shape)).to(torch.bfloat16)
    model.save_pretrained(args.dir)
    n = sum(p.numel() for p in model.parameters())
    return {"params": n, "build_s": time.perf_counter() - t, "device": device, "shape": shape}


def _measure(sampler, prompts, sc, args) -> dict:
    """One compiling call, then ``args.runs`` timed generate calls (prefill + decode, synced at the end)."""
    t = time.perf_counter()
    out = sampler.generate(prompts, sc, sync_timing=True)
    compile_s = time.perf_counter() - t
    if not (out.lengths == args.new_tokens).all():
        raise RuntimeError(f"generation stopped early: {out.lengths.tolist()}")
    walls, decodes, prefills = [], [], []
    for _ in range(args.runs):
        t = time.perf_counter()
        out = sampler.generate(prompts, sc, sync_timing=True)
        walls.append(time.perf_counter() - t)
        decodes.append(out.stats["decode_s"])
        prefills.append(out.stats["prefill_s"])
    return {
        "tokens_per_s": len(prompts) * args.new_tokens / min(walls),
        "tokens_per_s_median": len(prompts) * args.new_tokens / statistics.median(walls),
        "wall_s": min(walls),
        "wall_median_s": statistics.median(walls),
        "wall_all_s": walls,
        "first_call_s_incl_compile": compile_s,
        "prefill_s": min(prefills),
        "decode_step_ms": min(decodes) / (args.new_tokens - 1) * 1e3,
        "first_tokens_row0": out.tokens[0, :8].tolist(),
        "_out": out,
    }


# Pass/fail of the numerics check on the 0.5B shape in bf16: twice the largest |dlogp| recorded over 14
# configurations x batches on an H200 (2026-11-30 sweep: max 0.0523, mean at most 0.0117; even the
# unfused XLA baseline reaches 0.0456, so this is bf16 noise over 24 layers, not a defect). A configuration
# beyond these computes something else (docs/results/logprob_numerics.md). Recorded at 0.5B only: a deeper
# --model may need its own scale (a failure there is worth a look, not yet proof of a defect).
LOGPROB_MAX_ABS = 0.105
LOGPROB_MEAN_ABS = 0.0235


def _logprob_check(recompute, model, prompts, out) -> dict:
    """Numerics of a configuration on the real model: the sampler's log-probs of its greedy tokens vs a
    full forward pass over prompt + generated tokens (bf16), with a pass/fail against the recorded scale."""
    import numpy as np

    prompts = np.asarray(prompts, np.int32)
    seqs = np.concatenate([prompts, out.tokens.astype(np.int32)], axis=1)
    p, n = prompts.shape[1], out.tokens.shape[1]
    lp = np.asarray(recompute(model, seqs))[:, p - 1 : p - 1 + n]
    diff = np.abs(lp - out.logprobs)
    max_abs, mean_abs = float(diff.max()), float(diff.mean())
    ok = max_abs <= LOGPROB_MAX_ABS and mean_abs <= LOGPROB_MEAN_ABS
    return {"max_abs": max_abs, "mean_abs": mean_abs, "ok": ok}


def numerics_status(j: dict) -> str:
    check = j.get("logprob_check")
    if not j:
        return "not run"
    if check and not check.get("ok", True):
        return f"numerics failed: |dlogp| max {check['max_abs']:.3f} mean {check['mean_abs']:.4f}"
    return "ok"


def _profile(sampler, prompts, sc, args) -> dict:
    """Kernel time per decode step of one traced generate call (CUPTI through jax.profiler)."""
    import jax

    trace_dir = Path(tempfile.mkdtemp(prefix="decode_trace_", dir=args.part.parent))
    try:
        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0
        options.host_tracer_level = 1
    except (AttributeError, TypeError):
        options = None
    t = time.perf_counter()
    with jax.profiler.trace(str(trace_dir), profiler_options=options):
        out = sampler.generate(prompts, sc, sync_timing=True)
    traced_s = time.perf_counter() - t
    summary = trace_kernel_summary(trace_dir, steps=args.new_tokens - 1)
    summary["traced_call_s"] = traced_s
    summary["traced_decode_step_ms"] = out.stats["decode_s"] / (args.new_tokens - 1) * 1e3
    summary["parse_s"] = time.perf_counter() - t - traced_s
    return summary


def phase_jax(args) -> dict:
    import jax
    from flax import nnx

    import models

    start = time.perf_counter()
    left = lambda: args.phase_budget - (time.perf_counter() - start)
    res: dict = {"device": jax_device_info(), "configs": {}, "decode_configs": {}}
    write_json(args.part, res)
    t = time.perf_counter()
    res["copy_bandwidth_Bps"] = copy_bandwidth(nbytes=(64 << 20) if args.tiny else (1 << 30))
    res["bandwidth_s"] = time.perf_counter() - t
    bw = res["copy_bandwidth_Bps"]
    models_by_attn: dict = {}

    def model_for(attn):
        if attn not in models_by_attn:
            t = time.perf_counter()
            models_by_attn[attn] = models.load_hf(args.dir, compute_dtype="bfloat16", attention_impl=attn)
            res.setdefault("load_s", {})[attn] = time.perf_counter() - t
        return models_by_attn[attn]

    model, cfg = model_for(args.attention)
    res["param_dtype"] = cfg.param_dtype
    # the loaded checkpoint's (the --model shape's) parameters, each read once per step in bf16
    weight_bytes = 2 * sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    res["weight_bytes_bf16"] = weight_bytes
    kv_per_token = cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * 2  # bf16 K and V, all layers
    res["kv_bytes_per_token_bf16"] = kv_per_token
    sc = models.SamplingConfig(max_new_tokens=args.new_tokens, temperature=0.0, eos_token_ids=())
    names = args.configs
    for name in names:
        overrides, attn = CONFIGS[name]
        decode = models.DecodeConfig(**overrides)
        res["decode_configs"][name] = {
            **{k: getattr(decode, k) for k in ("fused_qkv", "attention", "command_buffers")},
            "steps_per_iteration": decode.steps_per_iteration,
            "resolved_attention": decode.resolved_attention(cfg),
            "compiler_options": decode.compiler_options(),
            "prefill_attention": attn or args.attention,
        }
    samplers: dict = {}
    recompute = None  # one forward program (per batch shape) checks every configuration's log-probs
    for b in args.batches:
        prompts = _prompts(b, args.prompt_len, cfg.vocab_size).tolist()
        for name in names:
            overrides, attn = CONFIGS[name]
            entry: dict = {}
            res["configs"].setdefault(name, {})[str(b)] = entry
            if left() < args.min_left_s:
                entry["skipped"] = f"phase budget ({left():.0f} s left)"
                print(f"[jax] {name} batch {b}: skipped (budget)", flush=True)
                continue
            attn = attn or args.attention
            try:
                key = (attn, b)
                if key not in samplers:
                    samplers[key] = models.Sampler(
                        model_for(attn)[0], prompt_buckets=(args.prompt_len,), batch_buckets=(b,)
                    )
                sampler = samplers[key]
                sampler.set_decode_config(models.DecodeConfig(**overrides))
                entry.update(_measure(sampler, prompts, sc, args))
                out = entry.pop("_out")
                if args.check:
                    if recompute is None:
                        recompute = nnx.jit(lambda m, t: models.token_logprobs(m, t))
                    entry["logprob_check"] = _logprob_check(recompute, model, prompts, out)
                step_s = entry["decode_step_ms"] / 1e3
                ctx_avg = args.prompt_len + args.new_tokens / 2
                entry.update(
                    floor_weights_ms=weight_bytes / bw * 1e3,
                    floor_weights_kv_ms=(weight_bytes + b * kv_per_token * ctx_avg) / bw * 1e3,
                )
                entry["step_over_floor"] = step_s * 1e3 / entry["floor_weights_kv_ms"]
                try:  # kernels per step (the program is compiled: this only reads it back)
                    text = sampler.decode_program_text(prompts, sc)
                    entry["hlo"] = hlo_loop_stats(text, sampler.decode_config.steps_per_iteration)["per_step"]
                except Exception as exc:
                    entry["hlo"] = f"unavailable: {exc!r}"
                kernels = (entry["hlo"] or {}).get("kernels") if isinstance(entry["hlo"], dict) else None
                print(
                    f"[jax] {name} batch {b}: {entry['tokens_per_s']:.0f} tok/s, step "
                    f"{entry['decode_step_ms']:.3f} ms, prefill {entry['prefill_s'] * 1e3:.1f} ms, "
                    f"kernels/step {kernels}, first call {entry['first_call_s_incl_compile']:.1f} s",
                    flush=True,
                )
                if args.profile and name == "default" and b == max(args.batches) and left() > 25:
                    try:
                        res["profile"] = {"config": name, "batch": b, **_profile(sampler, prompts, sc, args)}
                        p = res["profile"]
                        print(
                            f"[jax] profile {name} batch {b}: {p['kernels_per_step']:.0f} kernels/step, "
                            f"kernel time {p['kernel_ms_per_step']:.3f} ms/step (untraced step "
                            f"{entry['decode_step_ms']:.3f} ms)",
                            flush=True,
                        )
                    except Exception as exc:
                        res["profile"] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
                        print(f"[jax] profile failed: {res['profile']['error']}", flush=True)
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {str(exc)[:800]}"
                print(f"[jax] {name} batch {b} failed: {entry['error']}", flush=True)
            write_json(args.part, res)
    res["trace_counts"] = {f"{a}/{b}": dict(s.trace_counts) for (a, b), s in samplers.items()}
    return res


def phase_torch(args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    res: dict = {"mode": args.torch_mode, "device": device, "torch_cuda": torch.version.cuda, "batches": {}}
    if device == "cuda":
        res["gpu"] = torch.cuda.get_device_name(0)
    write_json(args.part, res)
    model = AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.bfloat16).to(device).eval()
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None
    if args.torch_mode == "compile":
        from transformers import CompileConfig

        model.generation_config.compile_config = CompileConfig(
            fullgraph=True, dynamic=False, mode="reduce-overhead"
        )
    else:
        model.generation_config.disable_compile = True
    vocab = model.config.vocab_size

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    for b in args.batches:
        ids = torch.as_tensor(_prompts(b, args.prompt_len, vocab)).to(device)
        kw = dict(
            attention_mask=torch.ones_like(ids),
            max_new_tokens=args.new_tokens,
            do_sample=False,
            cache_implementation="static",
        )
        entry: dict = {}
        try:
            with torch.inference_mode():
                t = time.perf_counter()
                out = model.generate(ids, **kw)
                sync()
                entry["first_call_s_incl_compile"] = time.perf_counter() - t
                if out.shape[1] != args.prompt_len + args.new_tokens:
                    raise RuntimeError(
                        f"generated {out.shape[1] - args.prompt_len} tokens, not {args.new_tokens}"
                    )
                # reduce-overhead records CUDA graphs over the first calls: at least 3 warm-ups for the peer
                entry["warmup_calls"] = max(PEER_MIN_WARMUP, args.warmup)
                for _ in range(entry["warmup_calls"]):
                    model.generate(ids, **kw)
                sync()
                walls = []
                for _ in range(args.runs):
                    t = time.perf_counter()
                    out = model.generate(ids, **kw)
                    sync()
                    walls.append(time.perf_counter() - t)
            entry.update(
                tokens_per_s=b * args.new_tokens / min(walls),
                tokens_per_s_median=b * args.new_tokens / statistics.median(walls),
                wall_s=min(walls),
                wall_median_s=statistics.median(walls),
                wall_all_s=walls,
                compiled=hasattr(model, "_compiled_call"),
                first_tokens_row0=out[0, args.prompt_len : args.prompt_len + 8].tolist(),
            )
            print(
                f"[torch {args.torch_mode}] batch {b}: {entry['tokens_per_s']:.0f} tok/s "
                f"(compiled={entry['compiled']})",
                flush=True,
            )
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
            print(f"[torch {args.torch_mode}] batch {b} failed: {entry['error']}", flush=True)
        res["batches"][str(b)] = entry
        write_json(args.part, res)
    return res
