"""Plot the size measurements of issue 33 (``scripts/gpu_sizes.sh``'s runs gathered in one JSON, as
docs/results/data/sizes_*.json holds them): training-step MFU per model and length against the 45% target,
decode tokens/s per batch (ours vs transformers' compiled ``generate``) at 1.5B, and the learner's memory as
XLA plans it vs ``models.memory_plan``'s prediction recorded in the run.

    python -m benchmarks.models.plot_sizes docs/results/data/sizes_2026-12-05_h200.json OUT.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

GiB = 2**30


def series(data: dict) -> dict:
    """The three panels' numbers from a sizes JSON (keys ``train_step_<model>_<len>``, ``decode_<model>``,
    ``peak_memory_*``); missing parts give empty lists."""
    train = []
    for key, run in sorted(data.items()):
        if key.startswith("train_step_") and not key.endswith("_first") and run.get("best"):
            best = run["best"]
            train.append((key.removeprefix("train_step_").replace("_", " / "), best["mfu_vs_989"]))
    decode = []
    for key, run in data.items():
        if key.startswith("decode_"):
            for batch, row in sorted(run["summary"]["batches"].items(), key=lambda kv: int(kv[0])):
                decode.append((int(batch), row["ours_tokens_per_s"], row.get("hf_tokens_per_s")))
    memory = []
    for key in ("peak_memory_compile_only", "peak_memory_run"):
        for case in (data.get(key) or {}).get("cases", []):
            if case.get("memory") and case.get("predicted"):
                label = f"{case['model']} {case['seq'] // 1024}K {case['learner']}"
                memory.append((label, case["memory"]["planned"] / GiB, case["predicted"]["total"] / GiB))
    return {"train": train, "decode": decode, "memory": list(dict.fromkeys(memory))}


def plot(data: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = series(data)
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.5))
    names, mfu = zip(*s["train"]) if s["train"] else ((), ())
    a.bar(names, [100 * m for m in mfu], color="tab:blue")
    a.axhline(45, color="tab:red", ls="--", label="target at 1.5B / 8K")
    a.set_ylabel("MFU, % of 989 TFLOP/s")
    a.set_title("training step (AdamW, bf16, cuDNN)")
    a.legend(loc="lower right")
    if s["decode"]:
        batches, ours, hf = zip(*s["decode"])
        pos = range(len(batches))
        b.bar([p - 0.2 for p in pos], ours, width=0.4, label="ours (models.Sampler)")
        peer = [h or 0 for h in hf]  # 0: the peer's compile ran out of its budget at that batch
        b.bar([p + 0.2 for p in pos], peer, width=0.4, label="transformers generate (compiled)")
        b.set_xticks(list(pos), [str(x) for x in batches])
        b.set_yscale("log")
    b.set_xlabel("batch")
    b.set_ylabel("tokens/s")
    b.set_title("decode, 1.5B, 128 new tokens")
    b.legend(loc="upper left")
    if s["memory"]:
        labels, xla, pred = zip(*s["memory"])
        pos = range(len(labels))
        c.barh([p + 0.2 for p in pos], xla, height=0.4, label="XLA's plan (= measured where run)")
        c.barh([p - 0.2 for p in pos], pred, height=0.4, label="models.memory_plan as it was at the run")
        c.set_yticks(list(pos), labels)
    c.set_xlabel("GiB")
    c.set_title("learner update memory")
    c.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m benchmarks.models.plot_sizes SIZES.json OUT.png", file=sys.stderr)
        return 2
    src = Path(argv[0])
    if not src.is_file():
        print(f"error: {src}: no such file", file=sys.stderr)
        return 2
    plot(json.loads(src.read_text()), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
