"""Host-side state of :class:`models.Engine`: requests, results, the slot table mirrored to the device each
segment (a few KB: page tables, last tokens, lengths, sampling settings, keys) and stop-string scanning."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._generation import SampleOutput, SamplingConfig

MAX_EOS = 16  # EOS ids per request (a fixed width: new ids never recompile)


@dataclass
class Request:
    """A prompt (token ids) to continue. ``seed`` or ``key``: the request's own random stream (two sampled
    requests with the same prompt and seed draw the same tokens: give the k samples of a task k seeds).
    ``parent``: a finished request submitted with ``keep_cache=True`` whose cached tokens this prompt extends
    (only the added tokens are prefilled). ``keep_cache``: keep this request's KV pages after it finishes."""

    prompt: list[int]
    config: SamplingConfig = field(default_factory=SamplingConfig)
    seed: int = 0
    key: Any = None
    parent: int | None = None
    keep_cache: bool = False

    def __post_init__(self):
        eos = self.config.eos_token_ids
        if eos is not None and len(eos) > MAX_EOS:
            raise ValueError(f"at most {MAX_EOS} EOS ids per request, got {len(eos)}")


@dataclass
class Result:
    """A finished request: ``response_ids`` (up to and including the stopping token), their fp32 log-probs
    under ``log_softmax(logits / temperature)`` (temperature 1 when greedy) and why it stopped."""

    id: int
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: np.ndarray
    finish_reason: str
    kept: bool = False


@dataclass
class KeptIds:
    """The token ids a kept cache holds (what ``models._continue.check_prefix`` reads)."""

    ids: tuple[int, ...]

    @property
    def length(self) -> int:
        return len(self.ids)


class SlotTable:
    """Per-slot state; ``owner[s] < 0`` marks a free slot (its page table points at the trash page)."""

    def __init__(self, num_slots: int, max_pages: int, trash: int, key_template):
        n = num_slots
        self.trash = trash
        self.owner = np.full((n,), -1, np.int64)
        self.table = np.full((n, max_pages), trash, np.int32)
        self.last = np.zeros((n,), np.int32)
        self.length = np.zeros((n,), np.int32)
        self.gen = np.zeros((n,), np.int32)
        self.max_new = np.ones((n,), np.int32)
        self.done = np.ones((n,), bool)
        self.temperature = np.ones((n,), np.float32)
        self.top_p = np.ones((n,), np.float32)
        self.greedy = np.ones((n,), bool)
        kt = np.asarray(key_template)
        self.keydata = np.zeros((n, *kt.shape), kt.dtype)
        self.eos = np.full((n, MAX_EOS), -1, np.int32)

    @staticmethod
    def eos_ids(cfg: SamplingConfig, model_config) -> tuple[int, ...]:
        return model_config.eos_token_ids if cfg.eos_token_ids is None else cfg.eos_token_ids

    def assign(self, slot: int, rid: int, pages: list[int], req, model_config) -> None:
        cfg = req.config
        self.owner[slot] = rid
        self.table[slot] = self.trash
        self.table[slot, : len(pages)] = pages
        self.max_new[slot] = cfg.max_new_tokens
        self.greedy[slot] = cfg.temperature == 0.0
        self.temperature[slot] = max(cfg.temperature, 1e-6)
        self.top_p[slot] = cfg.top_p
        key = req.key if req.key is not None else jax.random.key(req.seed)
        self.keydata[slot] = np.asarray(jax.random.key_data(key))
        eos = self.eos_ids(cfg, model_config)
        self.eos[slot] = -1
        self.eos[slot, : len(eos)] = eos
        self.done[slot] = True  # until its first token is drawn

    def start(self, slot: int, token: int, length: int) -> None:
        self.last[slot], self.length[slot], self.gen[slot], self.done[slot] = token, length, 1, False

    def advance(self, slot: int, token: int, n: int) -> None:
        self.last[slot] = token
        self.length[slot] += n
        self.gen[slot] += n

    def finish(self, slot: int) -> None:
        self.done[slot] = True

    def free(self, slot: int) -> list[int]:
        """Release ``slot``; returns its pages in logical order."""
        pages = [int(p) for p in self.table[slot] if p != self.trash]
        self.owner[slot] = -1
        self.table[slot] = self.trash
        self.done[slot] = True
        return pages

    def device_args(self) -> dict:
        return {
            "table": jnp.asarray(self.table),
            "last": jnp.asarray(self.last),
            "length": jnp.asarray(self.length),
            "gen": jnp.asarray(self.gen),
            "max_new": jnp.asarray(self.max_new),
            "done": jnp.asarray(self.done),
            "temperature": jnp.asarray(self.temperature),
            "top_p": jnp.asarray(self.top_p),
            "greedy": jnp.asarray(self.greedy),
            "keydata": jnp.asarray(self.keydata),
            "eos": jnp.asarray(self.eos),
        }


def sample_output(results: list[Result], max_new: int, pad_id: int, stats: dict) -> SampleOutput:
    """Results as the arrays of ``Sampler.generate`` ([n, max_new], pad / 0 after each response)."""
    tokens = np.full((len(results), max_new), pad_id, np.int32)
    logprobs = np.zeros((len(results), max_new), np.float32)
    for i, r in enumerate(results):
        tokens[i, : len(r.response_ids)] = r.response_ids
        logprobs[i, : len(r.logprobs)] = r.logprobs
    lengths = np.array([len(r.response_ids) for r in results], np.int64)
    return SampleOutput(
        prompt_ids=[r.prompt_ids for r in results],
        tokens=tokens,
        logprobs=logprobs,
        mask=np.arange(max_new)[None, :] < lengths[:, None],
        lengths=lengths,
        finish_reasons=[r.finish_reason for r in results],
        stats=stats,
    )
