"""research: the science.

What exists: ``research.data`` (KernelBench and JSONL/Parquet loaders, the operator library, synthesis of
fused tasks with filters, decontamination and held-out splits). Being built: the agent loop with tools,
skills and policies (``research.agent``) and the staged RL pipeline (``research.rl``); until they land they
are not here.

May import: ``models``, jax/flax/optax/orbax, torch (task execution on CPU), numpy, and ``kernels_env`` only
through its client/protocol modules (``kernels_env.client``, ``kernels_env.rules.messages``).
Must never import: hydra, omegaconf, ``experiments``.
"""
