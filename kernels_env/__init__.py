"""kernels_env: the CUDA sandbox that judges candidate kernels (a separate process; no JAX).

It compiles candidate kernels (nvcc/NVRTC/load_inline/Triton), checks them against PyTorch references on
random and adversarial inputs, times them against eager / torch.compile baselines, profiles them and defends
against reward hacks. Callers speak to it only through ``client`` (``SandboxClient``) and ``session``
(``WorkspaceSession``, an agent's per-episode workspace); ``python -m kernels_env`` is its CLI.

    client/, session.py     the doors: judge candidates, run tools, hold an agent's workspace
    rules/                  contracts: config, protocols, policies, rewards, verdict schema, summary, messages
    judge/                  one candidate in stages: build/ (load, build) -> run/ (trials, input families,
                            timing, re-checks; with check/ and timing/) -> assemble/ (the verdict)
    guard/                  the reward-hack defences the judge wraps around every candidate call
    fastpath/               building CUDA without torch headers (nvcc -> ctypes, NVRTC -> CuPy), cached
    tools/                  the agent's diagnostic tools: compile, profile (ncu), sanitize, roofline
    runtime/                worker processes: supervisor and pool on the caller's side, the worker main loop;
                            the Ray backend (ray_fleet, ray_pool, ray_actor: workers as actors on a cluster)
    host/                   the machine: CUDA toolkit discovery, environment capture, disk cache, processes
    reports/                many verdicts: batch runs, KernelBench-style summaries, the degenerate-task audit
    cli/                    ``python -m kernels_env evaluate|batch|baseline|compile|profile|...``

Layering (``tests/test_boundaries.py``): rules <- host <- fastpath, guard <- judge <- tools <- runtime <-
client, session <- reports <- cli; each imports only what stands to its left.
May import: the standard library, torch, numpy, cupy, triton, psutil, tqdm/rich; ray (lazily, only when
the Ray backend starts, so ``import kernels_env`` never loads it).
Must never import: jax, flax, optax, orbax, ``models``, ``research``, ``experiments``, hydra, omegaconf.
"""
