"""Batched generation with a KV cache: one jitted prefill, then a jitted ``lax.while_loop`` over decode steps.

Shapes are bucketed (prompt length and batch padded up to the next bucket; prompts are left-padded so every
row writes the same cache slot each step), so different prompts in one bucket reuse one compilation. The
loop exits early once every row has stopped. EOS stops on device; stop strings need the tokenizer, so the
loop then runs in segments of ``stop_check_interval`` steps and the host scans only the new tokens' text
between segments (at most ``interval - 1`` wasted steps per stop; without stop strings it is one call).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import _continue
from ._decode import CACHE_MULTIPLE, DecodeConfig
from ._generation import (
    DEFAULT_BATCH_BUCKETS,
    DEFAULT_PROMPT_BUCKETS,
    EOS,
    FINISH_NAMES,
    LENGTH,
    RUNNING,
    SampleOutput,
    SamplingConfig,
    StopChecker,
    bucket,
)
from ._model import KVCache, cache_from_prefill, cast_params
from ._sampling import sample_tokens


class _Carry(NamedTuple):
    step: jax.Array  # tokens generated so far
    tokens: jax.Array  # [B, M]
    logprobs: jax.Array  # [B, M]
    gen_len: jax.Array  # [B] tokens that count (mask = arange < gen_len)
    done: jax.Array  # [B]
    finish: jax.Array  # [B]
    kv_start: jax.Array  # [B] first real cache slot (left padding)
    cache: KVCache
    key: jax.Array


@dataclass(frozen=True)
class _Static:
    max_new: int
    greedy: bool
    top_k: int
    use_top_p: bool
    candidates: int
    pad_id: int
    prompt_len: int  # the prompt bucket P: generated token j sits at cache slot P + j
    cache_len: int  # >= P + max_new (padded to a multiple of 64 for pallas attention)


@dataclass(frozen=True)
class _Plan:  # the decode program's structure (DecodeConfig resolved for the model and backend)
    attention: str
    fused_qkv: bool
    steps: int


def _sample(logits, key, dyn, static: _Static):
    """``sample_tokens`` with a generation's settings (``dyn`` traced, ``static`` compiled in)."""
    return sample_tokens(
        logits,
        key,
        temperature=dyn["temperature"],
        top_p=dyn["top_p"],
        greedy=static.greedy,
        top_k=static.top_k,
        use_top_p=static.use_top_p,
        candidates=static.candidates,
    )


def _on_device(window):
    """A continuation window (tokens, positions, lengths, src_k, src_v, delta) as the extend programs
    take it."""
    tokens, positions, lengths, src_k, src_v, delta = window
    return jnp.asarray(tokens), jnp.asarray(positions), jnp.asarray(lengths), src_k, src_v, jnp.asarray(delta)


class Sampler:
    """Generate from a :class:`models.CausalLM`.

        sampler = Sampler(model, tokenizer=tok)
        out = sampler.generate(prompt_ids, SamplingConfig(max_new_tokens=128, temperature=0.7), seed=0)

    ``decode`` (:class:`DecodeConfig`) chooses how the decode loop is compiled (default: the fastest
    measured on a GPU); ``set_decode_config`` switches it (one more compilation per new setting).
    ``set_model`` swaps in new weights of the same shapes (e.g. after an RL update) without recompiling.
    ``trace_counts`` counts traces of the two jitted functions (a retrace means a recompile)."""

    def __init__(
        self,
        model,
        *,
        tokenizer=None,
        prompt_buckets=DEFAULT_PROMPT_BUCKETS,
        batch_buckets=DEFAULT_BATCH_BUCKETS,
        decode: DecodeConfig | None = None,
    ):
        self.tokenizer = tokenizer
        self.prompt_buckets = tuple(prompt_buckets)
        self.batch_buckets = tuple(batch_buckets)
        self.trace_counts = {"prefill": 0, "decode": 0}
        self.set_model(model)
        self._prefill = jax.jit(self._prefill_impl, static_argnames=("graphdef", "static"))
        self._extend = jax.jit(self._extend_impl, static_argnames=("graphdef", "static"))
        self._extend_logits = jax.jit(self._extend_forward, static_argnames=("graphdef", "static"))
        self._decode_jits: dict[tuple, Any] = {}
        self.set_decode_config(decode or DecodeConfig())

    def set_model(self, model) -> None:
        self.config = model.config
        self.graphdef, self.state = nnx.split(model)
        if hasattr(self, "decode_config"):  # re-resolve (e.g. sharded weights keep XLA attention)
            self.set_decode_config(self.decode_config)

    def set_decode_config(self, decode: DecodeConfig) -> None:
        """Use ``decode`` from the next call on (programs of earlier settings stay cached)."""
        if not isinstance(decode, DecodeConfig):
            raise TypeError(f"decode must be a DecodeConfig, got {type(decode).__name__}")
        self.decode_config = decode
        sharded = any(
            len(getattr(getattr(x, "sharding", None), "device_set", ())) > 1
            for x in jax.tree.leaves(self.state)
        )
        self._plan = _Plan(
            attention=decode.resolved_attention(self.config, sharded=sharded),
            fused_qkv=decode.fused_qkv,
            steps=decode.steps_per_iteration,
        )
        options = decode.compiler_options()
        key = tuple(sorted(options.items()))
        if key not in self._decode_jits:  # one jitted function per set of XLA options
            self._decode_jits[key] = jax.jit(
                self._decode_impl,
                static_argnames=("graphdef", "static", "plan"),
                donate_argnums=(2,),
                compiler_options=options or None,
            )
        self._decode = self._decode_jits[key]
        self.compiler_options = options

    # --- jitted pieces ------------------------------------------------------------------------------------

    def _inference_model(self, graphdef, state):
        return cast_params(nnx.merge(graphdef, state), self.config.compute_jnp_dtype)

    def _prefill_impl(self, state, tokens, lengths, key, dyn, *, graphdef, static: _Static):
        self.trace_counts["prefill"] += 1
        model = self._inference_model(graphdef, state)
        p = tokens.shape[1]
        attn_mask = jnp.arange(p)[None, :] >= (p - lengths)[:, None]
        hidden, kvs = model.model(tokens, attention_mask=attn_mask, return_kv=True)
        cache = cache_from_prefill(kvs, static.cache_len)
        logits = model.logits(hidden[:, -1])
        return self._first_step(logits, lengths, p - lengths, cache, key, dyn, static)

    def _extend_forward(self, state, tokens, positions, lengths, src_k, src_v, delta, *, graphdef, static):
        """The window of a continued turn (``models._continue``): shift each row's cache into place and run
        the window tokens against it. Returns the last position's logits and the filled cache."""
        model = self._inference_model(graphdef, state)
        t = tokens.shape[1]
        p = static.prompt_len
        cache = KVCache(
            _continue.shifted_cache(src_k, delta, static.cache_len),
            _continue.shifted_cache(src_v, delta, static.cache_len),
        )
        hidden, cache = model.model.decode(tokens, cache, p - t, positions, p - lengths, attention="xla")
        return model.logits(hidden[:, -1]), cache

    def _extend_impl(
        self, state, tokens, positions, lengths, src_k, src_v, delta, key, dyn, *, graphdef, static
    ):
        self.trace_counts["prefill"] += 1
        logits, cache = self._extend_forward(
            state, tokens, positions, lengths, src_k, src_v, delta, graphdef=graphdef, static=static
        )
        kv_start = static.prompt_len - lengths
        return self._first_step(logits, lengths, kv_start, cache, key, dyn, static)

    def _first_step(self, logits, lengths, kv_start, cache, key, dyn, static: _Static) -> _Carry:
        b = logits.shape[0]
        tok, lp = _sample(logits, jax.random.fold_in(key, 0), dyn, static)
        active = lengths > 0  # padding rows of the batch bucket are born finished
        tok = jnp.where(active, tok, static.pad_id)
        eos = active & jnp.isin(tok, dyn["eos"])
        m = static.max_new
        finish = jnp.where(eos, EOS, jnp.where(active & (m == 1), LENGTH, RUNNING)).astype(jnp.int32)
        return _Carry(
            step=jnp.int32(1),
            tokens=jnp.full((b, m), static.pad_id, jnp.int32).at[:, 0].set(tok),
            logprobs=jnp.zeros((b, m), jnp.float32).at[:, 0].set(jnp.where(active, lp, 0.0)),
            gen_len=active.astype(jnp.int32),
            done=(~active) | eos | (m == 1),
            finish=finish,
            kv_start=kv_start.astype(jnp.int32),
            cache=cache,
            key=key,
        )

    def _decode_impl(self, state, carry: _Carry, until, dyn, *, graphdef, static: _Static, plan: _Plan):
        self.trace_counts["decode"] += 1
        model = self._inference_model(graphdef, state)
        blocks, fused = model.model.decode_weights()  # per-layer weight views, made once outside the loop
        fused = fused if plan.fused_qkv or plan.attention == "fused" else None
        p, m = static.prompt_len, static.max_new

        def running(c: _Carry):
            return (c.step < until) & ~jnp.all(c.done)

        def step(c: _Carry):
            prev = jax.lax.dynamic_slice_in_dim(c.tokens, c.step - 1, 1, axis=1)
            hidden, cache = model.model.decode(
                prev,
                c.cache,
                p + c.step - 1,
                kv_start=c.kv_start,
                blocks=blocks,
                fused=fused,
                attention=plan.attention,
            )
            logits = model.logits(hidden[:, 0])
            tok, lp = _sample(logits, jax.random.fold_in(c.key, c.step), dyn, static)
            active = ~c.done
            tok = jnp.where(active, tok, static.pad_id)
            lp = jnp.where(active, lp, 0.0)
            eos = active & jnp.isin(tok, dyn["eos"])
            last = active & ~eos & (c.step + 1 >= m)
            finish = jnp.where(eos, EOS, jnp.where(last, LENGTH, c.finish))
            return _Carry(
                step=c.step + 1,
                tokens=jax.lax.dynamic_update_slice_in_dim(c.tokens, tok[:, None], c.step, axis=1),
                logprobs=jax.lax.dynamic_update_slice_in_dim(c.logprobs, lp[:, None], c.step, axis=1),
                gen_len=c.gen_len + active.astype(jnp.int32),
                done=c.done | eos | last,
                finish=finish.astype(jnp.int32),
                kv_start=c.kv_start,
                cache=cache,
                key=c.key,
            )

        def guarded_step(c: _Carry):
            # A later step of an unrolled iteration runs unconditionally and commits only if the loop would
            # have run it. Its cache write needs no guard: a step past ``until`` is rerun by the next call
            # from the same inputs (writing the same values), and one past the end writes slot >= P + m - 1,
            # which no step reads (the last token is never fed back).
            new, go = step(c), running(c)
            keep = functools.partial(jnp.where, go)
            return new._replace(
                step=keep(new.step, c.step),
                tokens=keep(new.tokens, c.tokens),
                logprobs=keep(new.logprobs, c.logprobs),
                gen_len=keep(new.gen_len, c.gen_len),
                done=keep(new.done, c.done),
                finish=keep(new.finish, c.finish),
            )

        def body(c: _Carry):
            c = step(c)
            for _ in range(plan.steps - 1):
                c = guarded_step(c)
            return c

        return jax.lax.while_loop(running, body, carry)

    # --- host side ----------------------------------------------------------------------------------------

    def _check_prompts(self, prompts: list[list[int]]) -> None:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("generate needs at least one prompt and every prompt needs at least one token")
        if any(t < 0 or t >= self.config.vocab_size for p in prompts for t in p):
            raise ValueError(f"prompt token ids must be in [0, {self.config.vocab_size})")

    def _pad_id(self) -> int:
        return self.config.pad_token_id if self.config.pad_token_id is not None else 0

    def _prepare(self, prompts: list[list[int]], config: SamplingConfig):
        """Bucketed, left-padded token and length arrays, the static settings and the traced values."""
        self._check_prompts(prompts)
        b = bucket(len(prompts), self.batch_buckets)
        p = bucket(max(len(x) for x in prompts), self.prompt_buckets)
        pad_id = self._pad_id()
        tokens = np.full((b, p), pad_id, np.int32)
        lengths = np.zeros((b,), np.int32)
        for i, x in enumerate(prompts):
            tokens[i, p - len(x) :] = x
            lengths[i] = len(x)
        static, dyn = self._settings(config, p)
        return tokens, lengths, static, dyn

    def _settings(self, config: SamplingConfig, p: int):
        """The static settings (prompt bucket ``p``) and the traced values of a call."""
        eos_ids = self.config.eos_token_ids if config.eos_token_ids is None else config.eos_token_ids
        eos = np.full((max(8, len(eos_ids)),), -1, np.int32)  # fixed length: new ids do not recompile
        eos[: len(eos_ids)] = eos_ids
        greedy = config.temperature == 0.0
        multiple = CACHE_MULTIPLE if self._plan.attention in ("pallas", "fused") else 1
        static = _Static(
            max_new=config.max_new_tokens,
            greedy=greedy,
            top_k=0 if greedy else config.top_k,
            use_top_p=(not greedy) and config.top_p < 1.0,
            candidates=config.top_p_candidates,
            pad_id=self._pad_id(),
            prompt_len=p,
            cache_len=-(-(p + config.max_new_tokens) // multiple) * multiple,
        )
        dyn = {
            "temperature": jnp.float32(max(config.temperature, 1e-6)),
            "top_p": jnp.float32(config.top_p),
            "eos": jnp.asarray(eos),
        }
        return static, dyn

    def _prepare_continue(self, prompts: list[list[int]], caches, config: SamplingConfig):
        """Inputs of a continued call (``models._continue``): window tokens, positions, context lengths,
        the rows' caches and their shifts, the static settings and the traced values."""
        self._check_prompts(prompts)
        if len(caches) != len(prompts):
            raise ValueError(f"caches has {len(caches)} entries for {len(prompts)} prompts")
        cached = [_continue.check_prefix(x, r, i) for i, (x, r) in enumerate(zip(prompts, caches))]
        b = bucket(len(prompts), self.batch_buckets)
        t = bucket(max(len(x) - c for x, c in zip(prompts, cached)), self.prompt_buckets)
        c = bucket(max(cached), self.prompt_buckets) if max(cached) else 0
        tokens, positions, lengths, p = _continue.window(prompts, cached, b, t, c, self._pad_id())
        src_k, src_v, ends = _continue.gather_sources(list(caches), b)
        new = np.array([len(x) - k for x, k in zip(prompts, cached)] + [0] * (b - len(prompts)), np.int32)
        delta = np.where(ends > 0, (p - new) - ends, 0).astype(np.int32)
        static, dyn = self._settings(config, p)
        return tokens, positions, lengths, src_k, src_v, delta, static, dyn

    def next_token_logits(self, prompts, caches=None) -> np.ndarray:
        """fp32 logits [n, V] after each prompt, computed like ``generate`` computes them (with ``caches``:
        only the new tokens against each row's kept cache). For checks of the continuation path."""
        prompts = [list(map(int, p)) for p in prompts]
        caches = list(caches) if caches is not None else [None] * len(prompts)
        if all(r is None for r in caches):
            caches = [None] * len(prompts)
            args = self._prepare_fresh_as_continue(prompts)
        else:
            args = self._prepare_continue(prompts, caches, SamplingConfig(max_new_tokens=1))
        *window, static, _ = args
        window = _on_device(window)
        logits, _ = self._extend_logits(self.state, *window, graphdef=self.graphdef, static=static)
        return np.asarray(logits, np.float32)[: len(prompts)]

    def _prepare_fresh_as_continue(self, prompts):
        cfg = self.config
        self._check_prompts(prompts)
        b = bucket(len(prompts), self.batch_buckets)
        t = bucket(max(len(x) for x in prompts), self.prompt_buckets)
        tokens, positions, lengths, p = _continue.window(prompts, [0] * len(prompts), b, t, 0, self._pad_id())
        z = jnp.zeros((b, cfg.num_layers, cfg.num_kv_heads, 1, cfg.head_dim), cfg.compute_jnp_dtype)
        static, dyn = self._settings(SamplingConfig(max_new_tokens=1), p)
        return tokens, positions, lengths, z, z, np.zeros((b,), np.int32), static, dyn

    def decode_program_text(self, prompts, config: SamplingConfig | None = None) -> str:
        """The optimised XLA program (HLO text) of the decode loop ``generate(prompts, config)`` runs, for
        diagnosis (kernel counts); compiles it if it is not compiled yet."""
        config = config or SamplingConfig()
        tokens, lengths, static, dyn = self._prepare([list(map(int, p)) for p in prompts], config)
        args = (self.state, jnp.asarray(tokens), jnp.asarray(lengths), jax.random.key(0), dyn)
        carry = jax.eval_shape(functools.partial(self._prefill, graphdef=self.graphdef, static=static), *args)
        lowered = self._decode.lower(
            self.state, carry, jnp.int32(1), dyn, graphdef=self.graphdef, static=static, plan=self._plan
        )
        return lowered.compile().as_text()

    def generate(
        self,
        prompts,
        config: SamplingConfig | None = None,
        *,
        seed: int = 0,
        key=None,
        sync_timing: bool = False,
        caches=None,
        keep_cache: bool = False,
    ) -> SampleOutput:
        """Sample continuations of ``prompts`` (a list of token-id lists, each non-empty).

        Deterministic for a fixed ``seed``/``key``. ``sync_timing`` blocks after prefill to report
        ``stats['prefill_s']`` and ``stats['decode_s']`` separately. ``keep_cache``: return each row's KV
        cache in ``out.caches`` (:class:`models.CacheRow`); ``caches``: one kept cache (or None) per prompt,
        whose prompt extends the cached tokens: only the new tokens are prefilled (``models._continue``).
        ``stats['prefill_tokens']``: window positions computed for real rows; ``stats['new_tokens']``:
        prompt tokens that were not cached."""
        config = config or SamplingConfig()
        prompts = [list(map(int, p)) for p in prompts]
        if config.stop_strings and self.tokenizer is None:
            raise ValueError("stop strings need the Sampler to be built with a tokenizer")
        n = len(prompts)
        key = jax.random.key(seed) if key is None else key
        continued = caches is not None and any(r is not None for r in caches)
        t0 = time.perf_counter()
        if continued:
            *window, static, dyn = self._prepare_continue(prompts, list(caches), config)
            tokens = window[0]
            carry = self._extend(
                self.state, *_on_device(window), key, dyn, graphdef=self.graphdef, static=static
            )
            new_tokens = sum(len(x) - r.length if r is not None else len(x) for x, r in zip(prompts, caches))
        else:
            tokens, lengths, static, dyn = self._prepare(prompts, config)
            carry = self._prefill(
                self.state,
                jnp.asarray(tokens),
                jnp.asarray(lengths),
                key,
                dyn,
                graphdef=self.graphdef,
                static=static,
            )
            new_tokens = sum(len(x) for x in prompts)
        b, p = tokens.shape[0], static.prompt_len
        pad_id = static.pad_id
        stats: dict[str, Any] = {
            "batch_bucket": b,
            "prompt_bucket": p,
            "decode_calls": 0,
            "prefill_tokens": n * tokens.shape[1],
            "new_tokens": new_tokens,
            "continued": continued,
        }
        if sync_timing:
            jax.block_until_ready(carry)
            stats["prefill_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        m = config.max_new_tokens
        interval = config.stop_check_interval if config.stop_strings else m
        checker = StopChecker(self.tokenizer, config.stop_strings, n) if config.stop_strings else None
        step, done = 1, np.asarray(carry.done)
        if checker is not None:
            carry, done = checker.update(carry, 0, 1)
        while step < m and not done[:n].all():
            until = min(step + interval, m)
            carry = self._decode(
                self.state,
                carry,
                jnp.int32(until),
                dyn,
                graphdef=self.graphdef,
                static=static,
                plan=self._plan,
            )
            stats["decode_calls"] += 1
            new_step, done = jax.device_get((carry.step, carry.done))  # one round trip
            new_step = int(new_step)
            if checker is not None:
                carry, done = checker.update(carry, step, new_step)
            step = new_step
        out_tokens, out_lp, gen_len, finish = jax.device_get(
            (carry.tokens, carry.logprobs, carry.gen_len, carry.finish)
        )
        if sync_timing:
            stats["decode_s"] = time.perf_counter() - t1
        stats["steps"] = step
        mask = np.arange(m)[None, :] < gen_len[:, None]
        kept = None
        if keep_cache:
            responses = [out_tokens[i, : gen_len[i]].tolist() for i in range(n)]
            kv_start = np.asarray(jax.device_get(carry.kv_start))
            kept = _continue.split_rows(carry.cache, prompts, responses, kv_start, p)
        return SampleOutput(
            prompt_ids=prompts,
            tokens=np.where(mask, out_tokens, pad_id)[:n],
            logprobs=np.where(mask, out_lp, 0.0).astype(np.float32)[:n],
            mask=mask[:n],
            lengths=gen_len[:n].astype(np.int64),
            finish_reasons=[FINISH_NAMES.get(int(f), "length") for f in finish[:n]],
            stats=stats,
            caches=kept,
        )
