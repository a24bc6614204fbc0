"""The agent's diagnostic tools: compile (diagnostics, ptxas resources, SASS mix), profile (Nsight Compute
per-kernel summary with bottleneck labels, or per-launch times without ncu; roofline floor), sanitize
(compute-sanitizer), for CUDA and Triton candidates.

Every tool is a function ``tool(args: dict, ctx: ToolContext) -> dict`` meant to run inside a sandbox
process: the core's worker calls ``handle_tool_request(request)``; ``run_tool_subprocess`` spawns one for
callers without a worker (CLI, tests). May import: the standard library, torch, numpy, cupy, triton.
Must never import: jax, flax, optax, orbax, models, research, experiments, hydra, omegaconf.
"""

from ._context import ToolContext, ToolError, ToolLimits
from ._registry import PROTOCOL, TOOLS, handle_tool_request, run_tool
from ._spawn import run_tool_subprocess

__all__ = [
    "PROTOCOL",
    "TOOLS",
    "ToolContext",
    "ToolError",
    "ToolLimits",
    "handle_tool_request",
    "run_tool",
    "run_tool_subprocess",
]
