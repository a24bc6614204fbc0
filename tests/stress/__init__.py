"""Stress tests: programs that load the sandbox for minutes (``soak``), runnable from the command line
(``python -m tests.stress.soak``) and, at a small count, as tests of the ``e2e`` tier (tests/_tiers.py)."""
