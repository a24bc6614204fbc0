"""research.toyenv: a toy kernel-writing environment judged by the real sandbox (issue 14's learning demo).

Tasks are chains of elementwise / softmax / normalisation / reduction ops over a (rows, cols) tensor, composed
with ``research.data``'s operator library and decontaminated against KernelBench. A policy writes a short
*plan* (which ops, how they are grouped into kernels, tile sizes, vector width, warps, tail mask), which is
rendered deterministically into a Triton ``ModelNew`` and judged by ``kernels_env.client.SandboxClient``
under the strict policy. The pretraining corpus holds correct, unoptimised plans (one kernel per op);
``optimisations`` reports what a plan does beyond them; ``legal_moves`` lists what a plan prefix may do next
(pretraining's grammar-aware smoothing) and ``detour`` gives corpus plans with a smoothed policy's detours as
input (labels: the corpus's next token). See docs/toyenv.md.

The environment's token side: ``observations`` (the plan vocabulary plus verdict-observation tokens,
``toy_tokenizer``) and ``rollout`` (``ToyEnv``: token-level episodes of a ``models`` decoder, one
``research.rollout.Trajectory`` each, and its ``RolloutConfig``); ``rollout`` imports ``models`` (JAX), so
it is imported by name (``from research.toyenv.rollout import ToyEnv``), not here.

Imports ``research.data``, ``research.rollout``, ``models`` and the sandbox only through
``kernels_env.client``; never ``research.rl`` or ``research.agent`` (both build on it).
"""

from .corpus import (
    OPTIMISATIONS,
    CorpusConfig,
    Optimisation,
    baseline_plan,
    corpus_plans,
    corpus_tasks,
    optimisation_shares,
    optimisations,
)
from .grammar import PLAN_TOKENS, Kernel, Plan, PlanError, Step, format_plan, parse_plan
from .legal import PlanPrefix, corpus_next, detour, legal_moves, smoothing_target
from .observations import OBS_TOKENS, TOY_VOCAB, observation_tokens, speed_bucket, toy_tokenizer
from .ops import TOY_CATEGORIES, TOY_OPS, ToyOp
from .render import RenderError, render_plan
from .reward import JudgeCache, Judgement, PlanJudge, cache_key
from .tasks import (
    HELDOUT,
    SPLITS,
    TEST,
    TRAIN,
    OpCall,
    ToyTask,
    ToyTaskConfig,
    ToyTaskSet,
    cpu_size,
    default_decontam_dir,
    make_task,
    make_tasks,
)
from .tokenizer import VOCAB, PlanTokenizer, prompt_tokens

__all__ = [
    "HELDOUT",
    "OBS_TOKENS",
    "OPTIMISATIONS",
    "PLAN_TOKENS",
    "SPLITS",
    "TEST",
    "TOY_CATEGORIES",
    "TOY_OPS",
    "TOY_VOCAB",
    "TRAIN",
    "VOCAB",
    "CorpusConfig",
    "JudgeCache",
    "Judgement",
    "Kernel",
    "OpCall",
    "Optimisation",
    "Plan",
    "PlanError",
    "PlanJudge",
    "PlanPrefix",
    "PlanTokenizer",
    "RenderError",
    "Step",
    "ToyOp",
    "ToyTask",
    "ToyTaskConfig",
    "ToyTaskSet",
    "baseline_plan",
    "cache_key",
    "corpus_next",
    "corpus_plans",
    "corpus_tasks",
    "cpu_size",
    "default_decontam_dir",
    "detour",
    "format_plan",
    "legal_moves",
    "make_task",
    "make_tasks",
    "observation_tokens",
    "optimisation_shares",
    "optimisations",
    "parse_plan",
    "prompt_tokens",
    "render_plan",
    "smoothing_target",
    "speed_bucket",
    "toy_tokenizer",
]
