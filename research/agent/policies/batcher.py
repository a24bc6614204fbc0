"""One generation thread for many episode threads: requests of every episode waiting for an action are
gathered into one ``models.Sampler.generate`` call (whose static batch and prompt buckets bound the
compilations). A batch goes when every registered episode is waiting (and none registered in the last
``max_wait_s``: episodes starting together register one by one), when ``max_batch`` requests wait, or
``max_wait_s`` after its first request (the others are busy in tools).

``lockstep`` (RL rollouts): a batch goes only when every registered episode is waiting, whatever the wait,
and its requests are ordered by their ``key``, so each generation call holds the same episodes in the same
rows run after run and a rollout is reproducible (a resumed run samples what the uninterrupted one did).
``reserve(n)`` counts ``n`` episodes before their threads register, so the first batch waits for all."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ._episodes import EpisodeQueue


@dataclass
class Request:
    prompt: list[int]
    cache: Any = None
    key: Any = 0
    future: Future = field(default_factory=Future)


class GenerationBatcher(EpisodeQueue):
    what = "generation batcher"

    def __init__(
        self,
        sampler,
        config,
        *,
        keep_cache: bool,
        max_batch: int,
        max_wait_s: float,
        seed: int = 0,
        lockstep: bool = False,
    ):
        self.sampler, self.config, self.keep_cache = sampler, config, keep_cache
        self.max_batch, self.max_wait_s, self.seed = max_batch, max_wait_s, seed
        super().__init__()
        self._pending: list[Request] = []
        self.lockstep = lockstep
        self._last_register = 0.0
        self.calls: list[dict[str, Any]] = []  # per sampler call: batch size, seconds, tokens
        self._thread = threading.Thread(target=self._loop, name="agent-generation", daemon=True)
        self._thread.start()

    def _registered(self) -> None:
        self._last_register = time.monotonic()

    def generate(self, prompt: list[int], cache=None, key: Any = 0):
        """(response ids, log-probs, finish reason, kept cache) of one prompt; blocks until its batch ran.
        ``key``: the request's row order in lockstep batches."""
        return self._queue(self._pending, Request(prompt, cache, key))

    def close(self) -> None:
        self._close(self._thread, timeout=10)

    def _take(self) -> list[Request] | None:
        with self._cv:
            while not self._pending and not self._closed:
                self._cv.wait()
            if self._closed and not self._pending:
                return None
            if self.lockstep:
                while len(self._pending) < self._active and not self._closed:
                    self._cv.wait()
                batch = sorted(self._pending, key=lambda r: r.key)[: self.max_batch]
                taken = {id(r) for r in batch}
                self._pending = [r for r in self._pending if id(r) not in taken]
                return batch
            deadline = time.monotonic() + self.max_wait_s
            while (
                (
                    len(self._pending) < min(self.max_batch, max(1, self._active))
                    # episodes starting together register one by one: give the others time to ask
                    or time.monotonic() - self._last_register < self.max_wait_s
                )
                and len(self._pending) < self.max_batch
                and not self._closed
                and (left := deadline - time.monotonic()) > 0
            ):
                self._cv.wait(min(left, self.max_wait_s / 4))
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            return batch

    def _loop(self) -> None:
        while (batch := self._take()) is not None:
            started = time.perf_counter()
            try:
                caches = [r.cache for r in batch] if any(r.cache is not None for r in batch) else None
                out = self.sampler.generate(
                    [r.prompt for r in batch],
                    self.config,
                    seed=self.seed + len(self.calls),
                    caches=caches,
                    keep_cache=self.keep_cache,
                )
            except Exception as exc:  # every waiting episode learns why; the thread keeps serving
                for r in batch:
                    r.future.set_exception(exc)
                continue
            n_gen = int(out.lengths.sum())
            self.calls.append(
                {
                    "batch": len(batch),
                    "seconds": time.perf_counter() - started,
                    "generated_tokens": n_gen,
                    "prefill_tokens": int(out.stats.get("prefill_tokens", 0)),
                    "new_tokens": int(out.stats.get("new_tokens", 0)),
                }
            )
            for i, r in enumerate(batch):
                n = int(out.lengths[i])
                cache = out.caches[i] if out.caches is not None else None
                r.future.set_result(
                    (out.tokens[i, :n].tolist(), out.logprobs[i, :n].tolist(), out.finish_reasons[i], cache)
                )
