"""research.data: task records and loaders, the seed operator library, composition of operators into
KernelBench-format tasks, filters (execution, sensitivity, runtime window, dedup, decontamination), splits
and the resumable synthesis pipeline behind ``python -m experiments.synthesize``.

Imports torch only inside worker processes (``checks``) and talks to the sandbox only through
``kernels_env.client`` (``gpu_filter``).
"""

from .candidates import make_candidate
from .compose import BUCKETS, compose, size_candidate
from .config import (
    FilterConfig,
    GpuFilterConfig,
    MixConfig,
    SplitConfig,
    SynthesisConfig,
    SynthesisConfigError,
)
from .cost import GpuProfile, estimate_ms
from .decontam import EvalIndex, ast_tokens, similarity, source_ops, source_signature
from .gpu_filter import SandboxTimer, apply_window, make_timer
from .loaders import ColumnMap, curriculum, load_dataset, load_kernelbench, load_synthesized
from .ops import CATEGORIES, LIBRARY
from .records import TaskRecord, read_jsonl, write_jsonl
from .render import render
from .splits import assign_split
from .synthesize import quotas, synthesize

__all__ = [
    "BUCKETS",
    "CATEGORIES",
    "LIBRARY",
    "ColumnMap",
    "EvalIndex",
    "FilterConfig",
    "GpuFilterConfig",
    "GpuProfile",
    "MixConfig",
    "SandboxTimer",
    "SplitConfig",
    "SynthesisConfig",
    "SynthesisConfigError",
    "TaskRecord",
    "apply_window",
    "assign_split",
    "ast_tokens",
    "compose",
    "curriculum",
    "estimate_ms",
    "load_dataset",
    "load_kernelbench",
    "load_synthesized",
    "make_candidate",
    "make_timer",
    "quotas",
    "read_jsonl",
    "render",
    "similarity",
    "size_candidate",
    "source_ops",
    "source_signature",
    "synthesize",
    "write_jsonl",
]
