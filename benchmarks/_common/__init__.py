"""Helpers shared by benchmarks of several areas: ``jax_bench`` (JAX device facts, ceilings measured in the
same run, timing, tables, XLA kernel counts) used by the models, rl and toyenv benchmarks."""
