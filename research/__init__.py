"""research: the science. Task data and synthesis (``research.data``), the agent loop with its tools,
skills and policies (``research.agent``: episodes, trajectories for RL, KernelBench evaluation of an agent),
the toy kernel environment (``research.toyenv``) and the staged RL pipeline (``research.rl``, its stages in
``research.rl.pipeline``).

May import: ``models``, jax/flax/optax/orbax, torch (task execution on CPU), numpy, openai and bm25s (the
agent), and ``kernels_env`` only through ``kernels_env.client``, ``kernels_env.rules.messages`` and the
agent workspace ``kernels_env.session``.
Must never import: hydra, omegaconf, ``experiments``.
"""
