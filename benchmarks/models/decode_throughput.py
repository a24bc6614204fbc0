"""Decode throughput: models.Sampler vs transformers' generate on the SAME weights and GPU, in one run.

    python -m benchmarks.models.decode_throughput --json /tmp/decode.json           # GPU: Qwen2.5-0.5B shape
    python -m benchmarks.models.decode_throughput --sweep --json /tmp/decode.json   # GPU: our configurations
    python -m benchmarks.models.decode_throughput --model 1.5b --batches 256,64,1 --json /tmp/decode.json
    python -m benchmarks.models.decode_throughput --tiny [--sweep] --json /tmp/d.json   # CPU smoke test

Phases, each a subprocess with its own timeout (a crash or hang in one loses nothing of the others), in this
order:
  build  transformers builds a Qwen2 model with random weights (bf16) and save_pretrained()s it to a temp dir;
  torch  generate(do_sample=False, cache_implementation="static") with transformers' automatic
         torch.compile of the decode forward (CompileConfig(fullgraph=True, dynamic=False,
         mode="reduce-overhead"), transformers' documented fastest setup); batches it could not finish
         are re-run eager-static (no compile, after the jax phase, if time is left) and labelled so;
  jax    models.load_hf on that dir; greedy generation (prompt P, N new tokens, EOS disabled) with
         models.Sampler (one jitted prefill + one jitted while_loop) for each of our configurations
         (default: only the library's default DecodeConfig; --sweep: it and the ablations in CONFIGS, each
         at every batch, the most informative first, skipped when the phase budget runs out); decode step
         time vs the weight-streaming floor = bytes of weights / copy bandwidth measured in this phase;
         kernels per decode step from the optimised program; with --sweep also a kernel-time profile of
         the default configuration at the largest batch.
Tokens/s = batch * N / wall time of one generate call (prefill included, both sides), best of the timed runs;
``*_median`` the same from the median run (the table shows both). The peer gets at least 3 warm-up calls.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common.jax_bench import table
from benchmarks._common.shapes import add_model_arg
from benchmarks._results import ROOT, env_info, read_json, write_json, write_results
from benchmarks.models._decode_phases import (
    CONFIGS,
    base_config,
    numerics_status,
    phase_build,
    phase_jax,
    phase_torch,
)

# --- orchestration --------------------------------------------------------------------------------------


def _run_phase(name: str, args, timeout: float, extra: list[str], part: Path, results=None, key=None) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.models.decode_throughput",
        "--phase",
        name,
        "--model",
        args.model,
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
        "--batches",
        ",".join(map(str, args.batches)),
        "--configs",
        ",".join(args.configs),
        "--phase-budget",
        f"{timeout - 10:.0f}",
    ]
    cmd += (["--tiny"] if args.tiny else []) + (["--profile"] if args.profile else [])
    cmd += (["--check"] if args.check else []) + extra
    print(f"=== phase {name} (timeout {timeout:.0f}s): {' '.join(cmd[3:])}", flush=True)
    t = time.perf_counter()
    status = "ok"
    try:
        rc = subprocess.run(cmd, timeout=max(timeout, 5), env=dict(os.environ), cwd=ROOT).returncode
        if rc != 0:
            status = f"failed rc={rc}"
    except subprocess.TimeoutExpired:
        status = "timed out"
    result = read_json(part) or {}
    result["status"] = status
    result["phase_s"] = time.perf_counter() - t
    print(f"=== phase {name}: {status} ({result['phase_s']:.0f}s)", flush=True)
    if results is not None:  # progressive writes: an outer timeout keeps finished phases
        results[key or name] = result
        write_results("decode_throughput", results, args.json)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test with tiny shapes")
    add_model_arg(ap)
    ap.add_argument("--sweep", action="store_true", help="all CONFIGS (default: only the default one)")
    ap.add_argument("--json", type=Path, default=None, help="write results here")
    ap.add_argument("--batches", type=str, default=None, help="comma list (default 64,16,1; sweep 64,1)")
    ap.add_argument("--configs", type=str, default=None, help=f"comma list of {','.join(CONFIGS)}")
    ap.add_argument("--prompt-len", type=int, default=None)
    ap.add_argument("--new-tokens", type=int, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument(
        "--attention",
        default=None,
        choices=["xla", "cudnn"],
        help="our prefill attention (default: cudnn on a GPU, else xla)",
    )
    ap.add_argument("--profile", action="store_true", help="kernel-time profile (default with --sweep)")
    ap.add_argument(
        "--check",
        action="store_true",
        help="log-probs vs a forward pass per configuration (default with --sweep)",
    )
    ap.add_argument("--budget-s", type=float, default=270.0, help="wall budget of all phases")
    ap.add_argument("--torch-budget-s", type=float, default=None, help="of which transformers at most")
    ap.add_argument("--phase", choices=["build", "jax", "torch"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--part", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--phase-budget", type=float, default=1e9, help=argparse.SUPPRESS)
    ap.add_argument("--min-left-s", type=float, default=8.0, help=argparse.SUPPRESS)
    ap.add_argument("--torch-mode", choices=["compile", "eager"], default="compile", help=argparse.SUPPRESS)
    args = ap.parse_args()
    default_batches = "4,1" if args.tiny else ("64,1" if args.sweep else "64,16,1")
    args.batches = [int(x) for x in (args.batches or default_batches).split(",")]
    args.configs = (args.configs or ",".join(CONFIGS if args.sweep else ["default"])).split(",")
    if unknown := [c for c in args.configs if c not in CONFIGS]:
        ap.error(f"unknown configurations {unknown}; known: {list(CONFIGS)}")
    args.prompt_len = args.prompt_len or (16 if args.tiny else 128)
    args.new_tokens = args.new_tokens or (8 if args.tiny else 128)
    args.profile = args.profile or (args.sweep and not args.phase)
    args.check = args.check or (args.sweep and not args.phase)
    if args.attention is None:
        args.attention = "xla" if args.tiny else "cudnn"

    if args.phase:
        fn = {"build": phase_build, "jax": phase_jax, "torch": phase_torch}[args.phase]
        result = fn(args)
        prev = read_json(args.part) or {}
        write_json(args.part, {**prev, **result})
        return

    start = time.perf_counter()
    left = lambda: args.budget_s - (time.perf_counter() - start)
    results: dict = {
        "benchmark": "decode_throughput",
        "mode": "sweep" if args.sweep else "default",
        "env": env_info(),
        "settings": {
            "model": "tiny" if args.tiny else args.model,
            "params": base_config(args).num_params(),
            "prompt_len": args.prompt_len,
            "new_tokens": args.new_tokens,
            "runs": args.runs,
            "batches": args.batches,
            "configs": args.configs,
            "tiny": args.tiny,
            "greedy": True,
            "our_prefill_attention": args.attention,
        },
    }
    with tempfile.TemporaryDirectory(prefix="models_decode_") as tmp:
        args.dir = Path(tmp) / "qwen2"
        parts = Path(tmp)
        results["build"] = _run_phase("build", args, min(60, left() * 0.3), [], parts / "build.json", results)
        if not (args.dir / "config.json").is_file():
            results["error"] = "building the transformers checkpoint failed; nothing to compare"
        else:
            # The peer first: its phase cannot skip work, ours skips configurations when its budget runs out.
            torch_budget = min(left() - 30, args.torch_budget_s or 1e9)
            results["torch"] = _run_phase("torch", args, torch_budget, [], parts / "torch.json", results)
            results["jax"] = _run_phase("jax", args, left() - 5, [], parts / "jax.json", results)
            missing = [
                b
                for b in args.batches
                if "tokens_per_s" not in results["torch"].get("batches", {}).get(str(b), {})
            ]
            if missing and left() > 15:
                eager = argparse.Namespace(**{**vars(args), "batches": missing})
                results["torch_eager"] = _run_phase(
                    "torch",
                    eager,
                    left() - 5,
                    ["--torch-mode", "eager"],
                    parts / "torch_eager.json",
                    results,
                    "torch_eager",
                )
    results["summary"] = summarize(results, args)
    results["wall_s"] = time.perf_counter() - start
    write_results("decode_throughput", results, args.json)
    print(results["summary"]["table"])


def _hf_entry(results: dict, b: int) -> tuple[dict, str]:
    t = results.get("torch", {}).get("batches", {}).get(str(b), {})
    mode = "compile" if t.get("compiled") else "static (not compiled)"
    if "tokens_per_s" not in t:
        t = results.get("torch_eager", {}).get("batches", {}).get(str(b), {})
        mode = "eager-static (compile did not finish)" if t else "-"
    return t, mode


def summarize(results: dict, args) -> dict:
    out: dict = {"batches": {}, "configs": {}}
    configs = results.get("jax", {}).get("configs", {})
    rows = []
    for name in args.configs:
        for b in args.batches:
            j = configs.get(name, {}).get(str(b), {})
            t, mode = _hf_entry(results, b)
            ratio = (
                j["tokens_per_s"] / t["tokens_per_s"] if "tokens_per_s" in j and "tokens_per_s" in t else None
            )
            hlo = j.get("hlo") if isinstance(j.get("hlo"), dict) else {}
            entry = {
                "ours_tokens_per_s": j.get("tokens_per_s"),
                "hf_tokens_per_s": t.get("tokens_per_s"),
                "ours_tokens_per_s_median": j.get("tokens_per_s_median"),
                "hf_tokens_per_s_median": t.get("tokens_per_s_median"),
                "hf_mode": mode,
                "ratio": ratio,
                "decode_step_ms": j.get("decode_step_ms"),
                "prefill_ms": None if j.get("prefill_s") is None else j["prefill_s"] * 1e3,
                "floor_weights_ms": j.get("floor_weights_ms"),
                "floor_weights_kv_ms": j.get("floor_weights_kv_ms"),
                "kernels_per_step": hlo.get("kernels"),
                "copies_per_step": hlo.get("copy"),
                "logprob_max_abs_diff": (j.get("logprob_check") or {}).get("max_abs"),
                "status": j.get("error") or j.get("skipped") or numerics_status(j),
            }
            out["configs"].setdefault(name, {})[str(b)] = entry
            if name == "default":
                out["batches"][str(b)] = entry
            rows.append(
                [
                    name,
                    b,
                    entry["ours_tokens_per_s"],
                    entry["hf_tokens_per_s"],
                    entry["ours_tokens_per_s_median"],
                    entry["hf_tokens_per_s_median"],
                    ratio,
                    entry["decode_step_ms"],
                    entry["prefill_ms"],
                    entry["floor_weights_kv_ms"],
                    entry["kernels_per_step"],
                    entry["copies_per_step"],
                    entry["logprob_max_abs_diff"],
                    entry["status"][:40],
                ]
            )
    best = {}
    for b in args.batches:
        ok = [(e["ratio"], n) for n, per in out["configs"].items() for bb, e in per.items() if bb == str(b)]
        ok = [x for x in ok if x[0] is not None]
        if ok:
            best[str(b)] = max(ok)[1]
    out["best_config"] = best
    bw = results.get("jax", {}).get("copy_bandwidth_Bps")
    out["copy_bandwidth_GBps"] = bw / 1e9 if bw else None
    target = out["batches"].get("64", {}).get("ratio")
    out["target_3x_at_64"] = None if target is None else target >= 3.0
    statuses = [e["status"] for per in out["configs"].values() for e in per.values()]
    out["numerics_ok"] = not any(s.startswith("numerics failed") for s in statuses)
    head = [
        "config",
        "batch",
        "ours tok/s",
        "HF tok/s",
        "ours med",
        "HF med",
        "ratio",
        "step ms",
        "prefill ms",
        "floor ms",
        "kern/step",
        "copy/step",
        "|dlogp|",
    ]
    hf_modes = {str(b): _hf_entry(results, b)[1] for b in args.batches}
    text = (
        f"decode throughput ({results['settings']['model']}, prompt {args.prompt_len}, "
        f"{args.new_tokens} new tokens, greedy, bf16; HF "
        f"{hf_modes}; copy bandwidth {out['copy_bandwidth_GBps'] or float('nan'):.0f} GB/s; floor = "
        f"(weights + mean KV) / bandwidth)\n" + table(rows, head + ["status"])
    )
    prof = results.get("jax", {}).get("profile")
    if isinstance(prof, dict) and "top" in prof:
        kinds = ", ".join(
            f"{k} {v['per_step']:.0f}x {v['us_per_step']:.0f}us" for k, v in list(prof["by_kind"].items())[:7]
        )
        text += (
            f"\nprofile ({prof['config']}, batch {prof['batch']}, kernels outside CUDA graphs): "
            f"{prof['kernels_per_step']:.0f} kernels, {prof['kernel_ms_per_step']:.3f} ms kernel time "
            f"per step; {kinds}"
        )
    out["table"] = text
    return out


if __name__ == "__main__":
    main()
