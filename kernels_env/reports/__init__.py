"""Many verdicts at once: ``batch`` (a directory of solutions against a directory of problems, resumable,
summarised by ``rules.summary``) and ``audit`` (the degenerate-task audit of a problem set).

Imports ``client``, ``rules``, ``host``, ``judge`` and ``guard``; never ``runtime`` or ``cli``.
"""
