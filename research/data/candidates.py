"""Turn ``(seed, bucket, index)`` into a task record plus the payload of its execution checks."""

from __future__ import annotations

from dataclasses import dataclass

from .compose import BUCKETS, PROXY_BATCH, compose, size_candidate
from .config import SynthesisConfig
from .ops import LIBRARY, Reject
from .records import TaskRecord
from .render import camel, render
from .splits import _unit_hash, assign_split


@dataclass
class Candidate:
    record: TaskRecord
    payload: dict  # for checks.check_task


def task_id(seed: int, bucket: str, j: int) -> str:
    return f"s{seed}-{bucket}-{j:05d}"


def drop_reason(exc: Reject) -> tuple[str, str]:
    msg = str(exc)
    for code in ("runtime_proxy", "memory"):
        if msg.startswith(code + ":"):
            return code, msg.split(":", 1)[1].strip()
    return "compose", msg


def make_candidate(cfg: SynthesisConfig, bucket: str, j: int) -> Candidate:
    """Raises Reject for a static drop (structure does not fit, runtime/memory proxy out of bounds)."""
    words = [cfg.seed, BUCKETS.index(bucket), j]
    f = cfg.filters
    sized = size_candidate(words, bucket, cfg.mix, cfg.profile, (f.runtime_min_ms, f.runtime_max_ms))
    prog = sized.program
    ctx = prog.ctx
    tid = task_id(cfg.seed, bucket, j)
    cats = list(dict.fromkeys(LIBRARY[o].category for o in prog.ops))
    n_ops = len(prog.ops)
    level = cfg.mix.module_level if bucket == "m" else cfg.mix.levels[n_ops - 1]
    source = render(prog)
    batch = next((c.name for c in ctx.consts.values() if c.kind == "batch"), None)

    # Checks at real size with only the batch sliced when that is cheap, else at proxy size everywhere.
    sliced = compose(words, bucket, cfg.mix, PROXY_BATCH)
    work = sum(max(c.flops, c.bytes / 4) for c in sliced.ctx.costs) / 1e6
    # half precision is emulated on most CPUs (slow), so only float32 tasks are checked at real size
    if work <= f.real_size_budget_mflop and batch is not None and prog.dtype == "float32":
        mode, overrides, expect = "sliced", {batch: PROXY_BATCH}, [d.real for d in sliced.out.shape]
    else:
        overrides = {c.name: c.proxy for c in ctx.consts.values() if c.proxy != c.real}
        mode, expect = "proxy", [d.proxy for d in prog.out.shape]
    name = f"{tid}_{'_'.join(camel(o) for o in prog.ops)}"[:120]
    record = TaskRecord(
        id=tid,
        source=source,
        ops=list(prog.ops),
        category=LIBRARY[prog.ops[0]].category,
        categories=cats,
        level=level,
        input_spec=[
            {"name": i.name, "shape": [d.real for d in i.shape], "dtype": i.dtype} for i in ctx.inputs
        ],
        dtypes=sorted({prog.dtype, *(i.dtype for i in ctx.inputs)}),
        output_shape=[d.real for d in prog.out.shape],
        origin="synthesized",
        split=assign_split(tid, cats, cfg.split),
        name=name,
        signature=prog.signature,
        proxy_sizes={c.name: c.proxy for c in ctx.consts.values() if c.proxy != c.real},
        batch_const=batch,
        est_ms=round(sized.est_ms, 4),
        meta={
            "bucket": bucket,
            "index": j,
            "seed": cfg.seed,
            "family": prog.family,
            "dtype": prog.dtype,
            "num_ops": n_ops,
            "target_ms": round(sized.target_ms, 4),
            "peak_gb": round(sized.peak_gb, 3),
            "check_mode": mode,
            "check_mflop": round(work, 2),
        },
    )
    payload = {
        "source": source,
        "overrides": overrides,
        "expect_shape": expect,
        "tolerance": f.tolerance,
        "compile_backend": f.compile_backend,
        "also_inductor": _unit_hash(tid + "/inductor") < f.inductor_fraction,
        "seed": j,
    }
    return Candidate(record, payload)
