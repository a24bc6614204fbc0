"""Toy tasks: chains of 2-4 toy ops over ``x`` of shape (batch_size, in_features), composed with
``research.data``'s operator library (its builders, value-domain rules and renderer write the reference),
sized
by its cost model to an eager runtime window on an H200, deduplicated, decontaminated against KernelBench and
split into ``train`` / ``test`` (held-out tasks of the training categories) / ``heldout_category`` (every task
that uses an op of the held-out category; no train or test task does).

A task is a pure function of ``(seed, op count, index)``; the set is the first quota of each split in stream
order, so the same config always gives the same tasks.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from research.data.checks import apply_overrides
from research.data.compose import Program
from research.data.config import SplitConfig
from research.data.cost import GpuProfile, estimate_ms
from research.data.decontam import EvalIndex
from research.data.ops import LIBRARY, Ctx, Reject, TensorState
from research.data.ops._core import names_in
from research.data.render import render
from research.data.splits import assign_split

from .ops import MAP, REDUCE, TOY_OPS

TRAIN, TEST, HELDOUT = "train", "test", "heldout_category"
SPLITS = (TRAIN, TEST, HELDOUT)
ROWS_CONST, COLS_CONST = "batch_size", "in_features"
MAX_ELEMENTS = 2**31 // 8  # int32 offsets in the kernels, with room for a tile past the end


def default_decontam_dir() -> str | None:
    """``$KERNELBENCH_DIR``, else ``../shared/kernelbench`` beside the repository, if it exists."""
    env = os.environ.get("KERNELBENCH_DIR")
    if env:
        return env
    here = Path(__file__).resolve().parents[3] / "shared" / "kernelbench"
    return str(here) if here.is_dir() else None


@dataclass
class ToyTaskConfig:
    """What the toy task set holds. Sizes: ``cols`` from ``cols_choices``, ``rows`` solved so that the
    cost-model eager estimate hits a log-uniform target in ``target_ms`` (rows a multiple of 64)."""

    seed: int = 0
    num_train: int = 192
    num_test: int = 48
    num_heldout: int = 48
    op_count_weights: dict[int, float] = field(default_factory=lambda: {2: 0.35, 3: 0.4, 4: 0.25})
    category_weights: dict[str, float] = field(
        default_factory=lambda: {"elementwise": 4.0, "attention": 1.0, "normalization": 1.0, "reduction": 1.0}
    )
    ops: list[str] = field(default_factory=lambda: sorted(TOY_OPS))
    heldout_category: str = "normalization"
    test_fraction: float = 0.2  # of the tasks without a held-out op, by id hash
    cols_choices: list[int] = field(default_factory=lambda: [1000, 1024, 1536, 2048, 3000, 4096])
    target_ms: tuple[float, float] = (0.15, 1.5)
    max_rows: int = 65536
    decontam_dir: str | None = dataclasses.field(default_factory=default_decontam_dir)
    decontam_threshold: float = 0.9
    max_candidates: int = 20000


@dataclass(frozen=True)
class OpCall:
    """One op of a task with the values the reference uses."""

    name: str
    params: tuple[float, ...] = ()
    attr: str | None = None  # parameter attribute of the reference (``self.<attr>``)


@dataclass
class ToyTask:
    id: str
    calls: tuple[OpCall, ...]
    rows: int
    cols: int
    split: str
    categories: tuple[str, ...]
    source: str  # KernelBench-format reference at (rows, cols)
    init_args: tuple[str, ...]  # Model.__init__ arguments (module-level constants)
    init_lines: tuple[str, ...]  # Model.__init__ body after super().__init__()
    est_ms: float  # cost-model eager estimate at (rows, cols)
    signature: str = ""
    nearest_eval: tuple[str | None, float] | None = None  # (KernelBench problem, AST similarity)

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.calls)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.rows,) if TOY_OPS[self.ops[-1]].kind == REDUCE else (self.rows, self.cols)

    def at_size(self, rows: int, cols: int) -> ToyTask:
        """The same task at other sizes (e.g. small ones for CPU mode): only the size constants change."""
        source = apply_overrides(self.source, {ROWS_CONST: int(rows), COLS_CONST: int(cols)})
        return dataclasses.replace(self, rows=int(rows), cols=int(cols), source=source)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["calls"] = [dataclasses.asdict(c) for c in self.calls]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToyTask:
        d = dict(d)
        d["calls"] = tuple(OpCall(c["name"], tuple(c["params"]), c.get("attr")) for c in d["calls"])
        for key in ("categories", "init_args", "init_lines"):
            d[key] = tuple(d[key])
        if d.get("nearest_eval") is not None:
            d["nearest_eval"] = tuple(d["nearest_eval"])
        return cls(**d)


def cpu_size(task: ToyTask, rows: int = 6) -> ToyTask:
    """A CPU-mode copy that keeps whether ``cols`` is a power of two (what a tail mask is about)."""
    pow2 = task.cols & (task.cols - 1) == 0
    return task.at_size(rows, 64 if pow2 else 100)


@dataclass
class ToyTaskSet:
    tasks: list[ToyTask]
    manifest: dict[str, Any]

    def split(self, name: str) -> list[ToyTask]:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; known: {SPLITS}")
        return [t for t in self.tasks if t.split == name]

    def save(self, path: str | os.PathLike) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with tmp.open("w") as f:
            for t in self.tasks:
                f.write(json.dumps(t.to_dict(), sort_keys=True) + "\n")
        os.replace(tmp, path)
        path.with_suffix(".manifest.json").write_text(json.dumps(self.manifest, indent=1, sort_keys=True))

    @classmethod
    def load(cls, path: str | os.PathLike) -> ToyTaskSet:
        path = Path(path)
        tasks = []
        for i, line in enumerate(path.read_text().splitlines()):
            if line.strip():
                try:
                    tasks.append(ToyTask.from_dict(json.loads(line)))
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise ValueError(f"{path}:{i + 1}: not a toy task ({exc})") from None
        mpath = path.with_suffix(".manifest.json")
        manifest = json.loads(mpath.read_text()) if mpath.exists() else {}
        return cls(tasks, manifest)


# --- composition -----------------------------------------------------------------------------------------
def _pick(rng: np.random.Generator, cfg: ToyTaskConfig, state: TensorState, last: bool, prev: str | None):
    fits = [
        n
        for n in cfg.ops
        if LIBRARY[n].accepts(state)
        and n != prev
        and (TOY_OPS[n].kind != REDUCE or last)
        and state.layout == "vec"  # reductions end the chain: every op sees the (rows, cols) tensor
    ]
    cats = sorted({TOY_OPS[n].category for n in fits} & set(cfg.category_weights))
    if not cats:
        raise Reject(f"no toy op fits after {prev}")
    w = np.array([cfg.category_weights[c] for c in cats], dtype=float)
    cat = cats[int(rng.choice(len(cats), p=w / w.sum()))]
    options = [n for n in fits if TOY_OPS[n].category == cat]
    return options[int(rng.integers(len(options)))]


def compose_chain(words: list[int], n_ops: int, cfg: ToyTaskConfig, rows: int, cols: int) -> Program:
    """Build one chain with the library's builders (the same words give the same ops and constants)."""
    pick_rng = np.random.default_rng([*words, 1])
    ctx = Ctx(rng=np.random.default_rng([*words, 2]), dtype="float32")
    b = ctx.dim(ROWS_CONST, "k", real=rows, proxy=4)
    d = ctx.dim(COLS_CONST, "features", real=cols, proxy=32)
    state = TensorState(ctx.input("x", (b, d)), (b, d), "float32", "vec")
    names: list[str] = []
    for i in range(n_ops):
        name = _pick(pick_rng, cfg, state, i == n_ops - 1, names[-1] if names else None)
        state = LIBRARY[name].build(ctx, state)
        names.append(name)
    return Program(ctx, names, state, "vec", "float32", str(n_ops))


def _calls(program: Program) -> tuple[OpCall, ...]:
    lines = program.ctx.forward_lines
    if len(lines) != len(program.ops):
        raise Reject(f"expected one forward line per op, got {len(lines)} for {program.ops}")
    out = []
    for name, line in zip(program.ops, lines):
        values, attr = TOY_OPS[name].parse(line)
        out.append(OpCall(name, values, attr))
    return tuple(out)


def _init_args(program: Program) -> tuple[str, ...]:
    used = {n for line in program.ctx.init_lines for n in names_in(line)}
    return tuple(c.name for c in program.ctx.consts.values() if c.name in used)


def _size(words, n_ops, cfg: ToyTaskConfig, cols: int, profile: GpuProfile) -> tuple[int, float, float]:
    t_rng = np.random.default_rng([*words, 3])
    lo, hi = cfg.target_ms
    target = math.exp(t_rng.uniform(math.log(lo), math.log(hi)))
    e1 = estimate_ms(compose_chain(words, n_ops, cfg, 1024, cols).ctx.costs, profile)
    e2 = estimate_ms(compose_chain(words, n_ops, cfg, 2048, cols).ctx.costs, profile)
    per_row = max((e2 - e1) / 1024, 1e-12)
    rows = int(round((target - (e1 - 1024 * per_row)) / per_row / 64)) * 64
    rows = max(64, min(cfg.max_rows, rows, (MAX_ELEMENTS // cols) // 64 * 64))
    return rows, target, estimate_ms(compose_chain(words, n_ops, cfg, rows, cols).ctx.costs, profile)


def make_task(cfg: ToyTaskConfig, n_ops: int, j: int, profile: GpuProfile | None = None) -> ToyTask:
    """One candidate task (raises ``Reject`` when the drawn chain does not fit the library's rules)."""
    profile = profile or GpuProfile()
    words = [cfg.seed, n_ops, j]
    cols = int(np.random.default_rng([*words, 4]).choice(cfg.cols_choices))
    rows, _, est = _size(words, n_ops, cfg, cols, profile)
    program = compose_chain(words, n_ops, cfg, rows, cols)
    tid = f"toy{cfg.seed}-{n_ops}-{j:05d}"
    cats = tuple(dict.fromkeys(TOY_OPS[n].category for n in program.ops))
    split_cfg = SplitConfig(
        test_categories=[cfg.heldout_category], val_fraction=0.0, test_fraction=cfg.test_fraction
    )
    split = assign_split(tid, cats, split_cfg)
    split = HELDOUT if cfg.heldout_category in cats else (TEST if split == "test" else TRAIN)
    init_lines = tuple(program.ctx.init_lines)
    return ToyTask(
        id=tid,
        calls=_calls(program),
        rows=rows,
        cols=cols,
        split=split,
        categories=cats,
        source=render(program),
        init_args=_init_args(program),
        init_lines=init_lines,
        est_ms=round(est, 4),
        signature=" > ".join(program.ctx.sig),
    )


def _validate(cfg: ToyTaskConfig) -> None:
    unknown = set(cfg.ops) - set(TOY_OPS)
    if unknown:
        raise ValueError(f"unknown toy ops {sorted(unknown)}; known: {sorted(TOY_OPS)}")
    cats = {TOY_OPS[n].category for n in cfg.ops}
    if cfg.heldout_category not in cats:
        raise ValueError(f"held-out category {cfg.heldout_category!r} has no op in {sorted(cats)}")
    if not any(TOY_OPS[n].kind == MAP for n in cfg.ops):
        raise ValueError("the toy op set needs at least one elementwise op")
    if any(k < 1 for k in cfg.op_count_weights):
        raise ValueError(f"op counts must be >= 1, got {sorted(cfg.op_count_weights)}")


def make_tasks(cfg: ToyTaskConfig | None = None, progress: bool = False) -> ToyTaskSet:
    """The toy task set: candidates in a fixed stream order, dropped for ``compose`` (rules do not fit),
    ``duplicate`` (same signature as a kept task), ``contaminated`` (nearest KernelBench problem above
    the threshold) or ``quota`` (its split is full)."""
    cfg = cfg or ToyTaskConfig()
    _validate(cfg)
    index = None
    if cfg.decontam_dir:
        index = EvalIndex.from_dir(cfg.decontam_dir)
    quotas = {TRAIN: cfg.num_train, TEST: cfg.num_test, HELDOUT: cfg.num_heldout}
    counts = sorted(cfg.op_count_weights)
    w = np.array([cfg.op_count_weights[k] for k in counts], dtype=float)
    stream = np.random.default_rng([cfg.seed, 17])
    kept: list[ToyTask] = []
    seen: set[str] = set()
    drops: Counter[str] = Counter()
    contaminated: list[dict[str, Any]] = []
    nearest_max = 0.0
    j = 0
    while any(sum(t.split == s for t in kept) < q for s, q in quotas.items()):
        if j >= cfg.max_candidates:
            have = {s: sum(t.split == s for t in kept) for s in SPLITS}
            raise RuntimeError(f"{cfg.max_candidates} candidates did not fill the quotas {quotas}: {have}")
        n_ops = counts[int(stream.choice(len(counts), p=w / w.sum()))]
        j += 1
        try:
            task = make_task(cfg, n_ops, j)
        except Reject:
            drops["compose"] += 1
            continue
        if task.signature in seen:
            drops["duplicate"] += 1
            continue
        if sum(t.split == task.split for t in kept) >= quotas[task.split]:
            drops["quota"] += 1
            continue
        if index is not None:
            name, score = index.nearest(task.source)
            task.nearest_eval = (name, round(score, 4))
            if score > cfg.decontam_threshold:
                drops["contaminated"] += 1
                contaminated.append({"id": task.id, "nearest": name, "score": round(score, 4)})
                continue
            nearest_max = max(nearest_max, score)
        seen.add(task.signature)
        kept.append(task)
        if progress and len(kept) % 50 == 0:
            print(f"toy tasks: {len(kept)} kept of {j} candidates", flush=True)
    manifest = {
        "config": dataclasses.asdict(cfg),
        "candidates": j,
        "kept": {s: sum(t.split == s for t in kept) for s in SPLITS},
        "drops": dict(drops),
        "decontamination": {
            "ran": index is not None,
            "dir": cfg.decontam_dir,
            "eval_problems": len(index) if index is not None else 0,
            "threshold": cfg.decontam_threshold,
            "dropped": contaminated,
            "max_kept_similarity": round(nearest_max, 4),
        },
        "ops": dict(Counter(n for t in kept for n in t.ops)),
        "est_ms": {
            "min": min(t.est_ms for t in kept),
            "max": max(t.est_ms for t in kept),
        },
    }
    return ToyTaskSet(kept, manifest)
