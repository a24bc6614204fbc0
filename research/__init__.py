"""research: the science. Task data and synthesis, the agent loop and skills, the staged RL pipeline,
metrics, evaluation and analysis helpers.

May import: ``models``, jax/flax/optax/orbax, torch (task execution on CPU), numpy, and ``kernels_env`` only
through its client/protocol modules (``kernels_env.client``, ``kernels_env.rules.messages``).
Must never import: hydra, omegaconf, ``experiments``.
"""
