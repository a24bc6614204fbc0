"""Decode throughput: models.Sampler vs transformers' generate on the SAME weights and GPU, in one run.

    python benchmarks/decode_throughput.py --json /tmp/decode.json          # GPU: Qwen2.5-0.5B shape
    python benchmarks/decode_throughput.py --tiny --json /tmp/decode.json   # CPU smoke test, tiny shapes

Phases, each a subprocess with its own timeout (a crash or hang in one loses nothing of the others):
  build  transformers builds a Qwen2 model with random weights (bf16) and save_pretrained()s it to a temp dir;
  jax    models.load_hf on that dir; greedy generation (prompt P, N new tokens, EOS disabled) at batch
         1/16/64 with models.Sampler (prefill + one jitted while_loop); decode step time vs the
         weight-streaming floor = bytes of weights / copy bandwidth measured in this phase;
  torch  generate(do_sample=False, cache_implementation="static") with transformers' automatic
         torch.compile of the decode forward (CompileConfig(fullgraph=True, dynamic=False,
         mode="reduce-overhead"), transformers' documented fastest setup); batches it could not finish
         are re-run eager-static (no compile) and labelled so.
Tokens/s = batch * N / wall time of one generate call (prefill included, both sides), best of the timed runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _models_bench import (  # noqa: E402
    copy_bandwidth,
    env_info,
    hlo_loop_stats,
    jax_device_info,
    read_json,
    table,
    write_json,
)

FULL = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
TINY = dict(
    vocab_size=1024,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=1024,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)


def _prompts(batch: int, length: int, vocab: int):
    import numpy as np

    return np.random.RandomState(batch).randint(0, vocab, (batch, length))


# --- phases (run in subprocesses) -----------------------------------------------------------------------


def phase_build(args) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = TINY if args.tiny else FULL
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    t = time.perf_counter()
    with torch.device(device):
        model = Qwen2ForCausalLM(Qwen2Config(**shape)).to(torch.bfloat16)
    model.save_pretrained(args.dir)
    n = sum(p.numel() for p in model.parameters())
    return {"params": n, "build_s": time.perf_counter() - t, "device": device, "shape": shape}


def phase_jax(args) -> dict:
    import jax
    from flax import nnx

    import models

    res: dict = {"device": jax_device_info(), "batches": {}}
    write_json(args.part, res)
    t = time.perf_counter()
    res["copy_bandwidth_Bps"] = copy_bandwidth(nbytes=(64 << 20) if args.tiny else (1 << 30))
    res["bandwidth_s"] = time.perf_counter() - t
    t = time.perf_counter()
    model, cfg = models.load_hf(args.dir, compute_dtype="bfloat16", attention_impl=args.attention)
    res["load_s"] = time.perf_counter() - t
    res["param_dtype"] = cfg.param_dtype
    weight_bytes = 2 * sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))  # bf16 bytes
    res["weight_bytes_bf16"] = weight_bytes
    sampler = models.Sampler(model, prompt_buckets=(args.prompt_len,), batch_buckets=tuple(args.batches))
    sc = models.SamplingConfig(max_new_tokens=args.new_tokens, temperature=0.0, eos_token_ids=())
    kv_per_token = cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * 2  # bf16 K and V, all layers
    for b in args.batches:
        prompts = _prompts(b, args.prompt_len, cfg.vocab_size).tolist()
        t = time.perf_counter()
        out = sampler.generate(prompts, sc, sync_timing=True)
        compile_s = time.perf_counter() - t
        if not (out.lengths == args.new_tokens).all():
            raise RuntimeError(f"batch {b}: generation stopped early: {out.lengths.tolist()}")
        walls, decodes = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            out = sampler.generate(prompts, sc, sync_timing=True)
            walls.append(time.perf_counter() - t)
            decodes.append(out.stats["decode_s"])
        best = min(walls)
        step_s = min(decodes) / (args.new_tokens - 1)
        ctx_avg = args.prompt_len + args.new_tokens / 2
        bw = res["copy_bandwidth_Bps"]
        res["batches"][str(b)] = {
            "tokens_per_s": b * args.new_tokens / best,
            "wall_s": best,
            "wall_all_s": walls,
            "first_call_s_incl_compile": compile_s,
            "prefill_s": out.stats.get("prefill_s"),
            "decode_step_ms": step_s * 1e3,
            "floor_weights_ms": weight_bytes / bw * 1e3,
            "floor_weights_kv_ms": (weight_bytes + b * kv_per_token * ctx_avg) / bw * 1e3,
            "kv_read_per_step_bytes_ours": b * kv_per_token * (args.prompt_len + args.new_tokens),
            "first_tokens_row0": out.tokens[0, :8].tolist(),
        }
        res["batches"][str(b)]["step_over_floor"] = (
            step_s * 1e3 / res["batches"][str(b)]["floor_weights_kv_ms"]
        )
        write_json(args.part, res)
        tps = res["batches"][str(b)]["tokens_per_s"]
        print(f"[jax] batch {b}: {tps:.0f} tok/s, step {step_s * 1e3:.3f} ms", flush=True)
    res["trace_counts"] = dict(sampler.trace_counts)
    if args.hlo_dir:  # kernels per decode step, and whether XLA put the loop body into command buffers
        try:
            res["decode_hlo"] = hlo_loop_stats(args.hlo_dir)
        except Exception as exc:  # noqa: BLE001 - diagnosis only
            res["decode_hlo"] = f"unavailable: {exc!r}"
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
                for _ in range(args.warmup):  # reduce-overhead records CUDA graphs over the first calls
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
                wall_s=min(walls),
                wall_all_s=walls,
                compiled=hasattr(model, "_compiled_call"),
                first_tokens_row0=out[0, args.prompt_len : args.prompt_len + 8].tolist(),
            )
            print(
                f"[torch {args.torch_mode}] batch {b}: {entry['tokens_per_s']:.0f} tok/s "
                f"(compiled={entry['compiled']})",
                flush=True,
            )
        except Exception as exc:  # noqa: BLE001 - recorded, the next batch still runs
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
            print(f"[torch {args.torch_mode}] batch {b} failed: {entry['error']}", flush=True)
        res["batches"][str(b)] = entry
        write_json(args.part, res)
    return res


# --- orchestration --------------------------------------------------------------------------------------


def _run_phase(
    name: str,
    args,
    timeout: float,
    extra: list[str],
    part: Path,
    results: dict | None = None,
    key: str | None = None,
) -> dict:
    cmd = (
        [
            sys.executable,
            __file__,
            "--phase",
            name,
            "--dir",
            str(args.dir),
            "--part",
            str(part),
            "--prompt-len",
            str(args.prompt_len),
            "--new-tokens",
            str(args.new_tokens),
            "--runs",
            str(args.runs),
            "--warmup",
            str(args.warmup),
            "--attention",
            args.attention,
        ]
        + (["--tiny"] if args.tiny else [])
        + extra
    )
    env = dict(os.environ)
    if name == "jax":  # dump the optimised decode program: kernel counts for the report
        hlo = part.parent / "hlo"
        cmd += ["--hlo-dir", str(hlo)]
        env["XLA_FLAGS"] = (
            env.get("XLA_FLAGS", "") + f" --xla_dump_to={hlo} --xla_dump_hlo_as_text"
            " --xla_dump_hlo_module_re=.*_decode_impl.*"
        ).strip()
    print(f"=== phase {name} (timeout {timeout:.0f}s): {' '.join(cmd[2:])}", flush=True)
    t = time.perf_counter()
    status = "ok"
    try:
        rc = subprocess.run(cmd, timeout=max(timeout, 5), env=env).returncode
        if rc != 0:
            status = f"failed rc={rc}"
    except subprocess.TimeoutExpired:
        status = "timed out"
    result = read_json(part) or {}
    result["status"] = status
    result["phase_s"] = time.perf_counter() - t
    print(f"=== phase {name}: {status} ({result['phase_s']:.0f}s)", flush=True)
    if results is not None and args.json:  # progressive writes: an outer timeout keeps finished phases
        results[key or name] = result
        write_json(args.json, results)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test with tiny shapes")
    ap.add_argument("--json", type=Path, default=None, help="write results here")
    ap.add_argument("--batches", type=str, default=None, help="comma list (default 64,16,1; tiny 4,1)")
    ap.add_argument("--prompt-len", type=int, default=None)
    ap.add_argument("--new-tokens", type=int, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--attention", default="xla", choices=["xla", "cudnn"], help="our prefill attention")
    ap.add_argument("--budget-s", type=float, default=270.0, help="wall budget of all phases")
    ap.add_argument("--phase", choices=["build", "jax", "torch"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--part", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--torch-mode", choices=["compile", "eager"], default="compile", help=argparse.SUPPRESS)
    ap.add_argument("--hlo-dir", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.batches = [int(x) for x in (args.batches or ("4,1" if args.tiny else "64,16,1")).split(",")]
    args.prompt_len = args.prompt_len or (16 if args.tiny else 128)
    args.new_tokens = args.new_tokens or (8 if args.tiny else 128)

    if args.phase:
        fn = {"build": phase_build, "jax": phase_jax, "torch": phase_torch}[args.phase]
        result = fn(args)
        prev = read_json(args.part) or {}
        write_json(args.part, {**prev, **result})
        return

    start = time.perf_counter()
    left = lambda: args.budget_s - (time.perf_counter() - start)  # noqa: E731
    results: dict = {
        "benchmark": "decode_throughput",
        "env": env_info(),
        "settings": {
            "prompt_len": args.prompt_len,
            "new_tokens": args.new_tokens,
            "runs": args.runs,
            "batches": args.batches,
            "tiny": args.tiny,
            "greedy": True,
            "our_prefill_attention": args.attention,
        },
    }
    with tempfile.TemporaryDirectory(prefix="models_decode_") as tmp:
        args.dir = Path(tmp) / "qwen2"
        parts = Path(tmp)
        results["build"] = _run_phase("build", args, min(90, left() * 0.3), [], parts / "build.json", results)
        if not (args.dir / "config.json").is_file():
            results["error"] = "building the transformers checkpoint failed; nothing to compare"
        else:
            results["jax"] = _run_phase(
                "jax",
                args,
                min(150, left() * 0.45),
                ["--batches", ",".join(map(str, args.batches))],
                parts / "jax.json",
                results,
            )
            results["torch"] = _run_phase(
                "torch",
                args,
                max(left() - 40, 30),
                ["--batches", ",".join(map(str, args.batches))],
                parts / "torch.json",
                results,
            )
            missing = [
                b
                for b in args.batches
                if "tokens_per_s" not in results["torch"].get("batches", {}).get(str(b), {})
            ]
            if missing and left() > 15:
                results["torch_eager"] = _run_phase(
                    "torch",
                    args,
                    left() - 5,
                    ["--torch-mode", "eager", "--batches", ",".join(map(str, missing))],
                    parts / "torch_eager.json",
                    results,
                    "torch_eager",
                )
    results["summary"] = summarize(results, args)
    results["wall_s"] = time.perf_counter() - start
    if args.json:
        write_json(args.json, results)
    print(results["summary"]["table"])


def summarize(results: dict, args) -> dict:
    rows, out = [], {"batches": {}}
    jb = results.get("jax", {}).get("batches", {})
    for b in args.batches:
        j = jb.get(str(b), {})
        t = results.get("torch", {}).get("batches", {}).get(str(b), {})
        mode = "compile" if t.get("compiled") else "static (not compiled)"
        if "tokens_per_s" not in t:
            t = results.get("torch_eager", {}).get("batches", {}).get(str(b), {})
            mode = "eager-static (compile did not finish)" if t else "-"
        ratio = j["tokens_per_s"] / t["tokens_per_s"] if "tokens_per_s" in j and "tokens_per_s" in t else None
        entry = {
            "ours_tokens_per_s": j.get("tokens_per_s"),
            "hf_tokens_per_s": t.get("tokens_per_s"),
            "hf_mode": mode,
            "ratio": ratio,
            "decode_step_ms": j.get("decode_step_ms"),
            "floor_weights_ms": j.get("floor_weights_ms"),
            "floor_weights_kv_ms": j.get("floor_weights_kv_ms"),
        }
        out["batches"][str(b)] = entry
        rows.append(
            [
                b,
                entry["ours_tokens_per_s"],
                entry["hf_tokens_per_s"],
                mode,
                ratio,
                entry["decode_step_ms"],
                entry["floor_weights_ms"],
                entry["floor_weights_kv_ms"],
            ]
        )
    head = ["batch", "ours tok/s", "HF tok/s", "HF mode", "ratio", "step ms", "floor(W) ms", "floor(W+KV) ms"]
    bw = results.get("jax", {}).get("copy_bandwidth_Bps")
    out["copy_bandwidth_GBps"] = bw / 1e9 if bw else None
    target = out["batches"].get("64", {}).get("ratio")
    out["target_3x_at_64"] = None if target is None else target >= 3.0
    out["table"] = (
        f"decode throughput (prompt {args.prompt_len}, {args.new_tokens} new tokens, greedy, bf16; "
        f"copy bandwidth {out['copy_bandwidth_GBps'] or float('nan'):.0f} GB/s)\n" + table(rows, head)
    )
    return out


if __name__ == "__main__":
    main()
