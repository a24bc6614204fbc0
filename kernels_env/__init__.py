"""kernels_env: the CUDA sandbox that judges candidate kernels.

It compiles candidate kernels (nvcc/NVRTC/load_inline/Triton), checks them against PyTorch references on
random and adversarial inputs, times them against eager / torch.compile baselines, profiles them and defends
against reward hacks. It runs as a separate process and is spoken to through its client/protocol.

May import: the standard library, torch, numpy, cupy, triton, psutil, tqdm/rich.
Must never import: jax, flax, optax, orbax, ``models``, ``research``, ``experiments``, hydra, omegaconf.
"""
