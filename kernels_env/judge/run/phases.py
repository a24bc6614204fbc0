"""Where a run worker's seconds go within one request: the wall time between progress reports, by label.

Reported as ``phases_s`` in every run-worker reply (and ``durations_s["run_phases"]`` in the verdict), so a
slow judge is diagnosed from its verdicts instead of guessed at.
"""

from __future__ import annotations

import time


class PhaseClock:
    """``start`` a request, ``enter`` each phase (a repeated label accumulates), ``stop`` for the totals."""

    def __init__(self) -> None:
        self._totals: dict[str, float] = {}
        self._label: str | None = None
        self._since = 0.0

    def start(self, label: str) -> None:
        self._totals = {}
        self._label, self._since = label, time.perf_counter()

    def enter(self, label: str) -> None:
        now = time.perf_counter()
        if self._label is not None:
            self._totals[self._label] = self._totals.get(self._label, 0.0) + now - self._since
        self._label, self._since = label, now

    def stop(self) -> dict[str, float]:
        self.enter("")
        self._label = None
        return {k: round(v, 4) for k, v in self._totals.items()}
