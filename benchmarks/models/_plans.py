"""Default attempt plans of the training benchmarks (``train_step``, ``ppo_update``) where their hand-sized
0.5B plans do not apply (another ``--model``, another sequence length): about STEP_TOKENS tokens per step,
remat policies from the lightest (saves the most, recomputes the least) to the heaviest, each kept only where
``models.memory_plan`` says the step fits DEVICE_GIB, ending with "full" whatever the plan says (the memory
model leaves out XLA's workspace: an attempt that OOMs is recorded and the next one runs)."""

from __future__ import annotations

import sys

import models
from benchmarks.models.memory_plan import DEVICE_GIB

STEP_TOKENS = 32768
# every policy models.ModelConfig accepts (REMAT_POLICIES), least recomputation first
REMAT_ORDER = ("none", "dots", "dots_no_batch", "save_attn", "full")


def fail(message: str):
    """A user error: one line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_plan(text: str, fields: int) -> list[tuple]:
    """``attn:batch[:micro]:remat,...`` -> tuples (ints for batch and micro); a malformed entry exits 2."""
    plan = []
    for entry in text.split(","):
        parts = entry.split(":")
        ok = len(parts) == fields and all(p.isdigit() and int(p) > 0 for p in parts[1:-1])
        if not ok or parts[-1] not in REMAT_ORDER or parts[0] not in ("xla", "cudnn"):
            layout = "attn:batch:remat" if fields == 3 else "attn:batch:micro:remat"
            remats = ", ".join(REMAT_ORDER)
            fail(f"--plan entry {entry!r} is not {layout} (attn xla|cudnn, remat one of {remats})")
        plan.append((parts[0], *(int(p) for p in parts[1:-1]), parts[-1]))
    return plan


def fits(cfg, batch: int, micro: int, seq: int, chunk: int, critic: bool) -> bool:
    """Whether ``models.memory_plan`` puts a step of ``batch`` rows of ``seq`` tokens in ``micro``
    micro-batches (AdamW, a critic or not) within DEVICE_GIB."""
    settings = models.MemorySettings(
        micro_batch_tokens=batch // micro * seq,
        seq_len=seq,
        chunk_size=chunk,
        critic=critic,
        accumulate=micro > 1,
    )
    return models.memory_plan(cfg, settings).fits(DEVICE_GIB * 1024**3)


def derived_plan(cfg, seq: int, *, chunk: int, critic: bool, accumulate: bool) -> list[tuple]:
    """(attention, batch, micro_batches, remat) attempts for ``cfg`` (its dtypes) at ``seq``: batch
    ``max(1, STEP_TOKENS // seq)``, cuDNN attention; per remat policy the fewest micro-batches (powers of two
    dividing the batch; only 1 without ``accumulate``) that fit, policies that fit none left out; "full"
    last, with the most micro-batches when nothing fits."""
    batch = max(1, STEP_TOKENS // seq)
    micros = [m for m in (1, 2, 4, 8, 16, 32) if batch % m == 0 and (accumulate or m == 1)]
    plan = []
    for remat in REMAT_ORDER:
        c = cfg.replace(attention_impl="cudnn", remat=remat)
        ok = [m for m in micros if fits(c, batch, m, seq, chunk, critic)]
        if ok or remat == "full":
            plan.append(("cudnn", batch, ok[0] if ok else micros[-1], remat))
    return plan
