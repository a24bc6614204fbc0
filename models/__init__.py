"""models: the Flax (NNX) decoder LLM used as policy and critic.

Hugging Face checkpoint loading/saving with numerical parity (Qwen2, Qwen3, Llama), a jitted KV-cache sampler,
and sharding rules.

May import: the standard library, jax, flax, optax, orbax, numpy, safetensors, transformers (tokenizers and
config parsing only; tests use its torch models as the independent reference).
Must never import: ``research``, ``kernels_env``, ``experiments``, hydra, omegaconf.
"""
