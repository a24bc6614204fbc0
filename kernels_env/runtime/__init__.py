"""The sandbox's processes: ``supervisor`` (one worker process seen from the caller: start, JSON-lines
messages with deadlines, memory watch, kill), ``pool`` (the local worker pool: hand-out, standbys, restarts),
``errors`` (the sandbox's exceptions), ``fleet`` (one client's workers), ``backends`` (the fleet by
``SandboxConfig.backend``), the Ray backend (``ray_fleet``, ``ray_pool``, ``ray_actor``), ``worker`` (the
worker main loop: ``python -m kernels_env.runtime.worker --role run|compile``), ``tool_host`` and ``devices``
(which device a sandbox uses).

Imports ``rules``, ``host``, ``judge`` and ``tools`` (the worker runs them); never ``client`` or ``reports``.
"""
