"""Benchmarks of the Flax models (``models``): decode throughput against transformers on the same weights
(``decode_throughput``), training-step and PPO-update MFU (``train_step``, ``ppo_update``), bf16 log-prob
numerics (``logprob_numerics``), the memory plan of a preset (``memory_plan``) and the continuous-batching
engine against the lockstep sampler (``rollout_engine``)."""
