"""Typed configuration of task synthesis (filled from Hydra by ``experiments.synthesize``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .cost import GpuProfile

PAPER_OP_COUNTS = [0.034, 0.838, 0.076, 0.028, 0.012]  # share of tasks with 1..5 ops (CUDA-Agent-Ops-6K)
PAPER_MODULES = 0.012  # share of transformer-module tasks


class SynthesisConfigError(ValueError):
    """A synthesis setting that cannot work (unknown category or op, empty window, a mix of nothing) or an
    out_dir that holds another dataset: the user's to fix, reported in one line."""


@dataclass
class MixConfig:
    """What gets composed: op counts, modules, dtypes, category preferences, sizes and levels."""

    op_count_weights: list[float] = field(default_factory=lambda: list(PAPER_OP_COUNTS))
    module_weight: float = PAPER_MODULES
    dtype_weights: dict[str, float] = field(
        default_factory=lambda: {"float32": 0.85, "bfloat16": 0.10, "float16": 0.05}
    )
    # Category of the first op (the "main" op of a fusion) and of every later op.
    first_category_weights: dict[str, float] = field(
        default_factory=lambda: {
            "matmul": 3.0, "conv": 3.0, "attention": 1.5, "normalization": 1.0, "elementwise": 1.0,
            "reduction": 1.0, "scan": 0.7, "indexing": 1.0, "loss": 0.5, "transformer": 0.7,
        }
    )  # fmt: skip
    next_category_weights: dict[str, float] = field(
        default_factory=lambda: {
            "elementwise": 4.0, "normalization": 1.5, "reduction": 1.5, "attention": 1.0, "matmul": 1.0,
            "conv": 1.0, "scan": 0.7, "indexing": 0.8, "loss": 0.6, "transformer": 0.4,
        }
    )  # fmt: skip
    exclude_ops: list[str] = field(default_factory=list)
    levels: list[int] = field(default_factory=lambda: [1, 2, 2, 3, 3])  # curriculum level of 1..5 ops
    module_level: int = 3
    module_extra_op_prob: float = 0.5  # a module task may get one more op after the block
    target_ms: list[float] = field(default_factory=lambda: [2.0, 20.0])  # log-uniform sizing target
    max_batch: int = 16384
    max_memory_gb: float = 16.0


@dataclass
class GpuFilterConfig:
    """The GPU runtime-window stage: eager medians measured by the sandbox (``SandboxClient.baseline``).

    The window only needs a coarse median, so the sandbox's timing is shortened (its L2 flush and input
    rotation stay on)."""

    enabled: bool = False
    gpu_name: str | None = None  # label for baselines; None: as reported by the sandbox
    timeout_s: float = 300.0
    warmup_iters: int = 2
    min_iters: int = 5
    max_iters: int = 50
    target_time_s: float = 0.1


@dataclass
class FilterConfig:
    runtime_min_ms: float = 1.0  # eager runtime window on the target GPU (CPU: the cost-model proxy)
    runtime_max_ms: float = 100.0
    tolerance: float = 1e-2  # outputs within atol=rtol=tolerance count as indistinguishable
    compile_backend: str = "aot_eager"  # checked on every task: none | eager | aot_eager | inductor
    inductor_fraction: float = 0.03  # deterministic share of tasks also checked with full inductor
    real_size_budget_mflop: float = 30.0  # checks at real size (batch sliced) when this cheap, else proxy
    timeout_s: float = 180.0  # per task, all checks
    dedup: bool = True
    decontam_dir: str | None = None  # eval problems (e.g. a KernelBench checkout); None: not run
    decontam_threshold: float = 0.9
    gpu: GpuFilterConfig = field(default_factory=GpuFilterConfig)


@dataclass
class SplitConfig:
    """Whole operator categories held out: any task using one goes to that split."""

    test_categories: list[str] = field(default_factory=lambda: ["scan", "loss"])
    val_categories: list[str] = field(default_factory=list)
    val_fraction: float = 0.05  # of the remaining tasks, by a hash of the id
    test_fraction: float = 0.0  # of the remaining tasks, by a hash of the id (random splits)


@dataclass
class SynthesisConfig:
    num_tasks: int = 6000
    out_dir: str = "outputs/datasets/ops"
    seed: int = 0
    workers: int = 0  # execution-check processes; 0: one per CPU core
    resume: bool = True
    progress: bool = True
    mix: MixConfig = field(default_factory=MixConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    profile: GpuProfile = field(default_factory=GpuProfile)
