"""The Flax policy's generation over a ``models.Engine`` (``generation.backend=engine``), with the surface of
``GenerationBatcher`` (``generate``, ``register`` / ``unregister``, ``reserve`` / ``release``, ``calls``).

The engine is single-threaded, so one driver thread owns it: episode threads queue their turns; the driver
submits each as an engine request as soon as it arrives (an episode's first turn: its prompt; a later turn:
``parent=`` its previous request, so only the observation is prefilled into the episode's kept pages) and
steps the engine while anything runs, handing each turn back the moment it finishes (continuous batching:
no episode waits for the slowest of a batch). Turn ``j`` of an episode draws with
``fold_in(fold_in(key(seed), episode key), j)``, so a sampled episode is the same whatever runs beside it;
no lockstep is needed for reproducibility. ``unregister(cache)`` frees an ended episode's kept pages.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import jax

from ._episodes import EpisodeQueue

SAVED = ("prefill_saved_sharing", "prefill_saved_continuation")


@dataclass
class _Turn:
    prompt: list[int]
    parent: int | None
    key: int
    future: Future = field(default_factory=Future)


def _siblings_together(turns: list[_Turn]) -> list[_Turn]:
    """First turns with one prompt (a task's k episodes) next to each other, larger groups first (ties in
    arrival order): the engine shares a prompt's prefill between requests admitted together, and threads
    ask in any order. Only the submission order changes; every request draws with its own key."""
    order: dict[tuple, list[_Turn]] = {}
    for i, t in enumerate(turns):
        order.setdefault(tuple(t.prompt) if t.parent is None else ("turn", i), []).append(t)
    return [t for group in sorted(order.values(), key=len, reverse=True) for t in group]


class EngineDriver(EpisodeQueue):
    what = "generation engine driver"

    def __init__(self, engine, config, *, keep_cache: bool, seed: int = 0, max_wait_s: float = 0.05):
        self.engine, self.config, self.keep_cache, self.seed = engine, config, keep_cache, seed
        self.max_wait_s = max_wait_s
        if engine.busy or engine.stats["kept_pages"]:
            raise RuntimeError("the engine is in use by another policy (requests or kept caches left)")
        super().__init__()
        self._inbox: list[_Turn] = []
        self._drops: list[int] = []
        self._running: dict[int, _Turn] = {}  # engine request id -> its turn
        self._turn_of: dict[int, int] = {}  # kept request id -> the episode turn it was
        self.calls: list[dict[str, Any]] = []  # per engine step: requests in it, seconds, tokens
        self._thread = threading.Thread(target=self._loop, name="agent-engine", daemon=True)
        self._thread.start()

    # --- the batcher's surface -------------------------------------------------------------------------

    def _ended(self, cache) -> None:  # its last kept request: the driver thread frees its pages
        if cache is not None:
            self._drops.append(cache)

    def generate(self, prompt: list[int], cache=None, key: Any = 0):
        """(response ids, log-probs, finish reason, kept request id) of one turn; ``cache``: the episode's
        previous kept request (None: its first turn), ``key``: the episode's random stream (an int)."""
        return self._queue(self._inbox, _Turn(list(prompt), cache, int(key)))

    def close(self) -> None:
        self._close(self._thread, timeout=60)

    # --- the driver thread -----------------------------------------------------------------------------

    def _request_key(self, turn: _Turn):
        j = 0 if turn.parent is None else self._turn_of.pop(turn.parent, -1) + 1
        key = jax.random.fold_in(jax.random.fold_in(jax.random.key(self.seed), turn.key), j)
        return key, j

    def _submit(self, turn: _Turn) -> None:
        import models

        try:
            key, j = self._request_key(turn)
            req = models.Request(
                turn.prompt,
                self.config,
                key=key,
                parent=turn.parent if self.keep_cache else None,
                keep_cache=self.keep_cache,
            )
            rid = self.engine.submit(req)
        except Exception as exc:  # e.g. a context over the engine's max_seq_len: this episode's error
            turn.future.set_exception(exc)
            return
        self._turn_of[rid] = j
        self._running[rid] = turn

    def _wait(self) -> tuple[list[_Turn], list[int]] | None:
        with self._cv:
            while not (self._inbox or self._drops or self._closed or self._running):
                self._cv.wait()
            if self._closed and not (self._inbox or self._drops or self._running):
                return None
            # An idle engine waits up to max_wait_s for the other live episodes to ask, so turns asked
            # together start together (one prefill; a group's shared prompt prefilled once). Timing
            # changes only what runs together, never what is drawn.
            deadline = time.monotonic() + self.max_wait_s
            while (
                not self._running
                and len(self._inbox) < self._active
                and not self._closed
                and (left := deadline - time.monotonic()) > 0
            ):
                self._cv.wait(left)
            inbox, drops = self._inbox, self._drops
            self._inbox, self._drops = [], []
            return inbox, drops

    def _loop(self) -> None:
        while (work := self._wait()) is not None:
            inbox, drops = work
            for rid in drops:
                self.engine.release(rid)
                self._turn_of.pop(rid, None)
            for turn in _siblings_together(inbox):
                if self._broken is not None:
                    turn.future.set_exception(self._broken)
                else:
                    self._submit(turn)
            if self._running:
                self._step()

    def _step(self) -> None:
        import models

        started = time.perf_counter()
        before = self.engine.stats
        try:
            finished = self.engine.step()
        except models.PagesBlocked as exc:  # the head request waits for pages that kept caches hold
            with self._cv:
                idle = len(self._running) < self._active  # an episode in its tools may end and free pages
                if idle and not self._closed:
                    self._cv.wait(0.05)
                    return
            self._fail(
                RuntimeError(
                    f"every live episode waits for KV pages ({exc}): raise generation.kv_budget_tokens "
                    "(it should hold every live episode's context) or run fewer episodes at once"
                )
            )
            return
        except Exception as exc:
            self._fail(exc)
            return
        after = self.engine.stats
        delta = {k: after[k] - before[k] for k in ("prefill_tokens", *SAVED)}
        self.calls.append(
            {
                "batch": len(self._running),
                "seconds": time.perf_counter() - started,
                "generated_tokens": sum(len(r.response_ids) for r in finished),
                "prefill_tokens": sum(delta.values()),  # the prompts' tokens, computed or not
                "new_tokens": delta["prefill_tokens"],  # the tokens actually prefilled
            }
        )
        for res in finished:
            self.engine.results.pop(res.id, None)
            turn = self._running.pop(res.id)
            turn.future.set_result((list(res.response_ids), res.logprobs.tolist(), res.finish_reason, res.id))

    def _fail(self, exc: Exception) -> None:
        """The engine cannot go on: its waiting requests are dropped (the episodes' kept caches stay until
        they end) and every waiting and later turn gets the error."""
        self._broken = exc
        for rid, turn in self._running.items():
            with contextlib.suppress(ValueError):  # admitted before the failure: nothing to drop
                self.engine.cancel(rid)
            turn.future.set_exception(exc)
        self._running.clear()
