"""The agent's diagnostic tools: compile (diagnostics, ptxas resources, SASS mix), profile (Nsight Compute
per-kernel summary with bottleneck labels, or per-launch times without ncu; roofline floor), sanitize
(compute-sanitizer), roofline, for CUDA and Triton candidates.

Callers use them through the sandbox: ``SandboxClient.tool(name, args, limits)`` (a ``tool`` request to the
worker that hosts the tool, see ``_serve``), a ``kernels_env.session.WorkspaceSession``, or
``python -m kernels_env compile|profile|sanitize|roofline``. Each tool is a function
``tool(args: dict, ctx: ToolContext) -> dict``; ``run_tool`` runs one in this process (a worker's).
May import: the standard library, torch, numpy, cupy, triton.
Must never import: jax, flax, optax, orbax, models, research, experiments, hydra, omegaconf.
"""

from ._context import DEFAULT_TIME_S, ToolContext, ToolError, ToolLimits
from ._registry import PROTOCOL, TOOLS, error_response, run_tool

__all__ = [
    "DEFAULT_TIME_S",
    "PROTOCOL",
    "TOOLS",
    "ToolContext",
    "ToolError",
    "ToolLimits",
    "error_response",
    "run_tool",
]
