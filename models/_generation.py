"""What generation takes and gives, shared by the ``Sampler``, the slot scheduler and the ``Engine``: the
``SamplingConfig``, the ``SampleOutput``, the finish codes, the shape buckets, and stop-string detection on
the host (``StopScanner``; ``StopChecker`` over a decode carry's arrays)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RUNNING, EOS, LENGTH, STOP = 0, 1, 2, 3
FINISH_NAMES = {EOS: "eos", LENGTH: "length", STOP: "stop"}
DEFAULT_PROMPT_BUCKETS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DEFAULT_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(unsafe_hash=True)
class SamplingConfig:
    """How to sample. ``temperature == 0`` is greedy. ``eos_token_ids`` None: the model config's.

    Changing ``max_new_tokens``, ``top_k``, greedy vs sampling, or whether ``top_p < 1`` recompiles;
    temperature, the ``top_p`` value, EOS ids and stop strings do not."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    eos_token_ids: tuple[int, ...] | None = None
    stop_strings: tuple[str, ...] = ()
    stop_check_interval: int = 32  # decode steps between host checks of stop strings
    top_p_candidates: int = 256  # nucleus searched among this many tokens first (exact: falls back to a sort)

    def __post_init__(self):
        if self.eos_token_ids is not None:
            self.eos_token_ids = tuple(int(t) for t in self.eos_token_ids)
        self.stop_strings = tuple(self.stop_strings or ())
        problems = []
        if self.max_new_tokens < 1:
            problems.append(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            problems.append(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            problems.append(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            problems.append(f"top_k must be >= 0, got {self.top_k}")
        if self.stop_check_interval < 1:
            problems.append("stop_check_interval must be >= 1")
        if any(not s for s in self.stop_strings):
            problems.append("stop strings must be non-empty")
        if problems:
            raise ValueError("invalid SamplingConfig: " + "; ".join(problems))


@dataclass
class SampleOutput:
    """Generated continuations of a batch of prompts (row i belongs to prompt i).

    ``tokens``/``logprobs``/``mask`` are [B, max_new_tokens]; ``mask`` is 1 for generated tokens up to and
    including the stopping token (EOS or the token completing a stop string), 0 after. ``logprobs`` are fp32
    log-probs of the chosen tokens under ``log_softmax(logits / temperature)`` (0 where masked)."""

    prompt_ids: list[list[int]]
    tokens: np.ndarray
    logprobs: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray
    finish_reasons: list[str]
    stats: dict[str, Any] = field(default_factory=dict)
    caches: list | None = None  # per-row models.CacheRow with generate(keep_cache=True)

    def response_ids(self, i: int) -> list[int]:
        return self.tokens[i, : self.lengths[i]].tolist()

    def texts(self, tokenizer) -> list[str]:
        return [tokenizer.decode(self.response_ids(i)) for i in range(len(self.prompt_ids))]


def bucket(n: int, buckets) -> int:
    """Smallest bucket >= n; beyond the largest, the next multiple of the largest."""
    for b in sorted(buckets):
        if b >= n:
            return b
    top = max(buckets)
    return -(-n // top) * top


class StopScanner:
    """Earliest token completing a stop string, scanning only new tokens (with a look-back window)."""

    def __init__(self, tokenizer, stops):
        self.tok, self.stops = tokenizer, stops
        # A token decodes to >= 1 byte, a character has <= 4 bytes: this many tokens cover any stop string.
        self.lookback = 4 * max(len(s) for s in stops) + 2

    def _hit(self, ids) -> bool:
        text = self.tok.decode(ids)
        return any(s in text for s in self.stops)

    def first_stop(self, tokens: list[int], start: int) -> int | None:
        """End (exclusive) of the earliest token at index >= ``start`` that completes a stop string."""
        if start >= len(tokens) or not self._hit(tokens[max(0, start - self.lookback) :]):
            return None
        for j in range(start, len(tokens)):
            if self._hit(tokens[max(0, j + 1 - self.lookback) : j + 1]):
                return j + 1
        return None


class StopChecker:
    """Host-side stop-string detection on the text of newly generated tokens only."""

    def __init__(self, tokenizer, stops, n: int):
        self.scan, self.n = StopScanner(tokenizer, stops), n

    def update(self, carry, start: int, end: int):
        # Whole arrays (a few KB): slicing on device would compile a program per segment end.
        tokens, gen_len, done, finish = jax.device_get(
            (carry.tokens, carry.gen_len, carry.done, carry.finish)
        )
        gen_len, done, finish = gen_len.copy(), done.copy(), finish.copy()
        changed = False
        for i in range(self.n):
            stop_at = min(int(gen_len[i]), end)
            if done[i] and finish[i] == STOP:
                continue
            hit = self.scan.first_stop(tokens[i, :stop_at].tolist(), start)
            if hit is not None:
                gen_len[i], done[i], finish[i], changed = hit, True, STOP, True
        if changed:
            carry = carry._replace(
                gen_len=jnp.asarray(gen_len), done=jnp.asarray(done), finish=jnp.asarray(finish)
            )
        return carry, done
