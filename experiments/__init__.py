"""experiments: thin Hydra entry points (<= 100 lines each): compose config, fill dataclasses, call library.

The only place (with ``tests``) that imports hydra/omegaconf. May import every project package.
"""
