"""research: the science.

What exists: ``research.rollout`` (the one typed rollout contract: Trajectory, Turn, RolloutConfig, the
token-in-token-out builder), ``research.data`` (KernelBench and JSONL/Parquet loaders, the operator library,
synthesis of fused tasks with filters, decontamination and held-out splits), ``research.agent`` (the ReAct
agent loop with its tools, skills and policies: episodes, trajectories for RL, KernelBench evaluation of an
agent), ``research.rl`` (advantage estimators, PPO/value/KL losses, the jitted learner, checkpoints, metrics,
and in ``research.rl.pipeline`` the staged pipeline: cold-start SFT, warm-up, RFT, value pretraining,
multi-turn PPO and export, on the real agent loop or the toy environment), ``research.toyenv`` (a toy
kernel-writing environment judged by the real sandbox), ``research.textpolicy`` (the small text-writing
policy of the learning study: its shape, tokenizer and checkpoint) and ``research.evaluation`` (released
solution sets judged against a KernelBench checkout, Table 1 for any result set, multirun ablation tables,
report figures). Not yet shown: the real agent pipeline learning on the GPU.

May import: ``models``, jax/flax/optax/orbax, torch (task execution on CPU), numpy, openai and bm25s (the
agent), yaml, matplotlib and pyarrow (evaluation), and ``kernels_env`` only through ``kernels_env.client``,
``kernels_env.rules.messages`` and the agent workspace ``kernels_env.session``.
Must never import: hydra, omegaconf, ``experiments``.
"""
