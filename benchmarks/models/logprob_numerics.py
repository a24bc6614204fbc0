"""How far the sampler's bf16 log-probs are from a recomputing forward pass: the distribution that the
tolerance of the GPU log-prob tests (``tests/models/test_models_gpu.py``) and the decode benchmark's numerics
pass/fail (``models.BF16_LOGPROB_ATOL``) are set from.

    python -m benchmarks.models.logprob_numerics --json /tmp/lp.json          # GPU: test model and 0.5B shape
    python -m benchmarks.models.logprob_numerics --tiny --json /tmp/lp.json   # CPU smoke run

For each model (the GPU tests' 2-layer model, fp32 master weights and bf16 compute; the ~0.5B Qwen2 shape in
bf16), several random initialisations, each decode configuration the tests cover, greedy and temperature 0.8:
|sampler log-prob - bf16 recompute| per generated token, and for scale |bf16 recompute - fp32 recompute|.
Quantiles (p50 ... p99.9, max) over every token of every run are recorded.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from benchmarks._common.jax_bench import jax_device_info, table
from benchmarks._results import env_info, write_results

QUANTILES = (50, 90, 99, 99.9, 100)


def model_configs(tiny: bool) -> dict:
    import models

    test_model = models.tiny_config(
        vocab_size=1000,
        num_layers=2,
        hidden_size=256,
        num_heads=8,
        num_kv_heads=2,
        head_dim=64,
        intermediate_size=512,
        param_dtype="float32",
        compute_dtype="bfloat16",
    )  # fmt: skip  (tests/models/test_models_gpu.py's CFG)
    if tiny:
        return {"test_model": test_model.replace(num_layers=1, hidden_size=64, num_heads=2, head_dim=32)}
    big = models.qwen2_0_5b_config(param_dtype="bfloat16", compute_dtype="bfloat16")
    return {"test_model": test_model, "qwen2_0.5b": big}


def decode_configs(tiny: bool) -> dict:
    import models

    if tiny:
        return {"xla": models.DecodeConfig(fused_qkv=False, attention="xla", command_buffers="default")}
    return {
        "xla_unfused": models.DecodeConfig(fused_qkv=False, attention="xla", command_buffers="default"),
        "default": models.DecodeConfig(),
        "pallas": models.DecodeConfig(attention="pallas"),
        "two_steps": models.DecodeConfig(steps_per_iteration=2),
    }


_LOGPROBS = {}


def _logprobs(model, seqs, temperature: float):
    """Recomputed log-probs (one jitted function per temperature, reused for every model of one shape)."""
    import jax.numpy as jnp
    from flax import nnx

    import models

    if temperature not in _LOGPROBS:
        t = temperature or 1.0
        _LOGPROBS[temperature] = nnx.jit(lambda m, s: models.token_logprobs(m, s, temperature=t))
    return _LOGPROBS[temperature](model, jnp.asarray(seqs))


def measure_model(cfg, decodes: dict, seed: int, batch: int, new_tokens: int, vocab: int) -> dict:
    """|sampler - bf16 recompute| and |bf16 - fp32 recompute| per generated token, for every decode
    configuration and temperature, on one random initialisation (one Sampler: compiled once per config)."""
    import numpy as np

    import models

    model = models.init_model(cfg, seed=seed)
    fp32_model = models.init_model(cfg.replace(param_dtype="float32", compute_dtype="float32"), seed=seed)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 48, size=batch)
    prompts = [rng.integers(1, vocab, size=n).tolist() for n in lengths]
    sampler = models.Sampler(model)
    out: dict = {}
    for dec_name, decode in decodes.items():
        sampler.set_decode_config(decode)
        for temperature in (0.0, 0.8):
            sc = models.SamplingConfig(max_new_tokens=new_tokens, temperature=temperature, eos_token_ids=())
            gen = sampler.generate(prompts, sc, seed=seed)
            seqs = np.zeros((batch, int(max(lengths)) + new_tokens), np.int32)
            for i, p in enumerate(prompts):
                seqs[i, : len(p) + new_tokens] = p + gen.tokens[i].tolist()
            bf16 = np.asarray(_logprobs(model, seqs, temperature))
            fp32 = np.asarray(_logprobs(fp32_model, seqs, temperature))
            windows = [slice(len(p) - 1, len(p) - 1 + new_tokens) for p in prompts]
            out[(dec_name, temperature)] = {
                "sampler_vs_bf16": np.concatenate(
                    [np.abs(gen.logprobs[i] - bf16[i, w]) for i, w in enumerate(windows)]
                ),
                "bf16_vs_fp32": np.concatenate(
                    [np.abs(bf16[i, w] - fp32[i, w]) for i, w in enumerate(windows)]
                ),
            }
    return out


def quantiles(values) -> dict:
    import numpy as np

    return {f"p{q:g}": float(np.percentile(values, q)) for q in QUANTILES} | {"tokens": int(values.size)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="results JSON (default: runs/benchmarks/)")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke run")
    ap.add_argument("--seeds", type=int, default=6)
    args = ap.parse_args()
    import numpy as np

    seeds = 2 if args.tiny else args.seeds
    result = {"benchmark": "logprob_numerics", "environment": {**env_info(), **jax_device_info()}, "runs": []}
    rows = []
    for model_name, cfg in model_configs(args.tiny).items():
        t = time.perf_counter()
        n_seeds = seeds if model_name == "test_model" else max(1, seeds // 2)
        parts = [
            measure_model(
                cfg, decode_configs(args.tiny), s, 4 if args.tiny else 8, 8 if args.tiny else 32, 1000
            )
            for s in range(n_seeds)
        ]
        for dec_name, temperature in parts[0]:
            diffs = {
                k: np.concatenate([p[(dec_name, temperature)][k] for p in parts])
                for k in parts[0][(dec_name, temperature)]
            }
            entry = {
                "model": model_name,
                "decode": dec_name,
                "temperature": temperature,
                "seeds": n_seeds,
                **{k: quantiles(v) for k, v in diffs.items()},
            }
            result["runs"].append(entry)
            s, f = entry["sampler_vs_bf16"], entry["bf16_vs_fp32"]
            rows.append(
                [model_name, dec_name, temperature, s["p50"], s["p99"], s["p100"], f["p99"], f["p100"]]
            )
            print(rows[-1], flush=True)
        result[f"{model_name}_seconds"] = round(time.perf_counter() - t, 1)
        write_results("logprob_numerics", result, args.json)
    worst = {}
    for r in result["runs"]:
        worst[r["model"]] = max(worst.get(r["model"], 0.0), r["sampler_vs_bf16"]["p100"])
    result["max_sampler_vs_bf16"] = worst
    head = ["model", "decode", "T", "p50", "p99", "max", "bf16-fp32 p99", "bf16-fp32 max"]
    result["table"] = table(rows, head)
    print(result["table"])
    write_results("logprob_numerics", result, args.json)


if __name__ == "__main__":
    main()
