"""The sandbox's processes: ``supervisor`` (worker processes seen from the caller: start, JSON-lines messages
with deadlines, memory watch, kill and restart, the worker pool), ``worker`` (the worker main loop:
``python -m kernels_env.runtime.worker --role run|compile``) and ``devices`` (which device a sandbox uses).

Imports ``rules``, ``host``, ``judge`` and ``tools`` (the worker runs them); never ``client`` or ``reports``.
"""
