"""Benchmarks of the CUDA sandbox (``kernels_env``): compile and judge throughput of the fast path against
torch's load_inline (``sandbox_throughput``, ``load_inline_throughput``), where a build's CPU time goes
(``build_phases``, ``pch_builds``), the reward-hack guard's cost (``guard_overhead``), the judge's profile
(``judge_profile``, ``plot_judge_phases``) and the agent tools' latency (``tool_latency``,
``profile_prestart``). Their problem and solution sets live beside them (``tasks/``, ``solutions/``); the
generated ones (``load_inline_set``, ``solutions/load_inline*``) are written into the cache on first use."""
