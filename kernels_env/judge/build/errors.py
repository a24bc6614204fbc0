"""The two ways loading fails: the candidate's (``LoadError``, with the verdict status it earns) and the
reference's (``ProblemError``, never blamed on the candidate).

A leaf: the loader, the agent workspace's build, the compile stage and the run worker raise and catch them.
"""

from __future__ import annotations

from typing import Any


class LoadError(Exception):
    """The solution (or problem) could not be loaded; ``status`` is the verdict it earns."""

    def __init__(self, status: str, error: str, messages: list[dict[str, Any]] | None = None):
        super().__init__(error)
        self.status = status
        self.error = error
        self.messages = messages or []


class ProblemError(Exception):
    """The reference itself is broken: a user/input error, never blamed on the candidate."""
