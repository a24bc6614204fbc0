"""A rollout engine with continuous batching, prefix sharing, multi-turn KV reuse and a KV memory budget.

``num_slots`` decode slots run together; each :meth:`Engine.step` admits waiting requests into free slots
(prefilling only what is not cached), decodes every active slot for ``segment_steps`` steps in one jitted
``lax.while_loop`` (fixed shapes, exits early once every slot is done), then the host retires finished slots
(EOS / length / stop string) so the next step refills them: no slot waits for the slowest row of a batch.

KV memory: a paged pool (``models._paged``), chosen over length-bucketed slot caches because one pool of
fixed pages bounds memory by a single number, lets a finished turn keep exactly its pages for the next turn
without copies, and needs no per-bucket recompiles or cache moves when a slot's length grows. The pool holds
``kv_budget_tokens // page_size`` pages. A request reserves every page it can need (context + max_new_tokens
- 1 positions) when admitted, so a running request never runs out of memory and nothing is preempted; one
that does not fit waits (FIFO), one that could never fit (more than the pool or than ``max_seq_len``) is a
``ValueError`` at :meth:`Engine.submit`. Pages are freed when a request finishes, except that a request
submitted with ``keep_cache=True`` keeps the pages of its cached tokens (they count against the budget until a
continuation takes them over or :meth:`Engine.release` frees them).

Multi-turn: a request naming ``parent`` (a finished request kept with ``keep_cache``) takes over its pages
and prefills only the tokens its prompt adds (the checks of ``models._continue``). Prefix sharing: a fresh
prompt equal to one being decoded (or admitted in the same step) is not prefilled again: the source's prompt
pages are copied into the new slot's pages and its first token is drawn from the source's stored last-position
logits with the request's own key (copies save prefill compute, not memory).

Sampling per request (:class:`models.SamplingConfig`): greedy and sampled rows mix in one step; requests that
sample with a different ``top_k`` / ``top_p_candidates`` than the running sampled requests wait until those
finish (both are compile-time constants). Row ``r`` draws its ``j``-th token with ``fold_in(key_r, j)``, so
results do not depend on slots, batch companions or ``segment_steps``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import _continue, _paged
from ._generation import FINISH_NAMES, SampleOutput, SamplingConfig, StopScanner, bucket
from ._model import cast_params
from ._slots import KeptIds, Request, Result, SlotTable, sample_output

EOS, LENGTH, STOP = 1, 2, 3


class PagesBlocked(RuntimeError):
    """The head of the queue cannot start: kept caches hold the pages it needs (``release`` them)."""


@dataclass(frozen=True)
class EngineConfig:
    """Shape of an :class:`Engine`: ``num_slots`` concurrent sequences, a pool of ``kv_budget_tokens //
    page_size`` KV pages, at most ``max_seq_len`` cache positions per request. ``continuous=False`` admits
    only when every slot is free (lockstep batches, for comparison); ``prefix_sharing=False`` prefills every
    prompt."""

    num_slots: int = 8
    page_size: int = 16
    kv_budget_tokens: int = 16384
    max_seq_len: int = 4096
    segment_steps: int = 16
    prefill_buckets: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    continuous: bool = True
    prefix_sharing: bool = True

    def __post_init__(self):
        problems = []
        for name in ("num_slots", "page_size", "kv_budget_tokens", "max_seq_len", "segment_steps"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.kv_budget_tokens < self.page_size:
            problems.append(f"kv_budget_tokens ({self.kv_budget_tokens}) is less than one page")
        if not self.prefill_buckets:
            problems.append("prefill_buckets must not be empty")
        if problems:
            raise ValueError("invalid EngineConfig: " + "; ".join(problems))

    @property
    def num_pages(self) -> int:
        return self.kv_budget_tokens // self.page_size

    @property
    def max_pages(self) -> int:
        return _paged.pages_for(self.max_seq_len, self.page_size)


class Engine:
    """Continuous-batching generation from a :class:`models.CausalLM`.

        engine = Engine(model, EngineConfig(num_slots=8, kv_budget_tokens=32768))
        rid = engine.submit(Request(prompt_ids, SamplingConfig(max_new_tokens=256), seed=1, keep_cache=True))
        results = engine.run_until_done()          # {id: Result}
        nxt = engine.submit(Request(prompt_ids + results[rid].response_ids + obs, cfg, parent=rid))

    ``step()`` runs one admission + decode segment + retirement and returns the requests finished in it.
    ``generate(prompts, config, seed=...)`` returns a :class:`models.SampleOutput` like ``Sampler.generate``.
    """

    def __init__(self, model, config: EngineConfig | None = None, *, tokenizer=None):
        self.config = config or EngineConfig()
        self.tokenizer = tokenizer
        self.model_config = model.config
        self.graphdef, self.state = nnx.split(model)
        c = self.config
        self.pool = _paged.empty_pool(self.model_config, c.num_pages, c.page_size)
        self.pages = _paged.PageAllocator(c.num_pages)
        self.slots = SlotTable(c.num_slots, c.max_pages, c.num_pages, jax.random.key_data(jax.random.key(0)))
        self.batch_buckets = tuple(sorted({min(2**i, c.num_slots) for i in range(12)}))
        self._prefill = jax.jit(self._prefill_impl, static_argnames=("graphdef",), donate_argnums=(1,))
        self._copy = jax.jit(_paged.copy_pages, donate_argnums=(0,))
        self._first = jax.jit(
            _paged.pick_tokens, static_argnames=("top_k", "use_top_p", "candidates", "all_greedy")
        )
        self._decode = jax.jit(self._decode_impl, static_argnames=("graphdef", "static"), donate_argnums=(1,))
        self._next_id = 0
        self._waiting: list[int] = []
        self._requests: dict[int, Request] = {}
        self._running: dict[int, dict] = {}  # id -> host state of an admitted request
        self._kept: dict[int, tuple[list[int], tuple[int, ...]]] = {}  # id -> (pages, cached ids)
        # prompt -> (slot, id, logits [V]) of a running request, or (None, pages, logits) of a finished one
        # whose prompt pages are held while a waiting request has the same prompt
        self._sources: dict[tuple[int, ...], tuple[Any, Any, Any]] = {}
        self.results: dict[int, Result] = {}
        self.reset_stats()

    def set_model(self, model) -> None:
        """New weights of the same shapes (no recompile); running requests continue with them."""
        self.graphdef, self.state = nnx.split(model)

    def set_scheduling(self, *, continuous: bool, prefix_sharing: bool) -> None:
        """Switch the host-side scheduling policy (no recompile); only while idle."""
        if self.busy:
            raise RuntimeError("set_scheduling needs an idle engine (no waiting or running requests)")
        self._drop_held(keep_wanted=False)
        self.config = dataclasses.replace(self.config, continuous=continuous, prefix_sharing=prefix_sharing)

    def reset_stats(self) -> None:
        # a counter per statistic (a keyword list like the model presets' in _config.py: shape only)
        self._stats = dict(
            generated_tokens=0,
            decode_steps=0,
            active_slot_steps=0,
            segments=0,
            prefill_calls=0,
            prefill_tokens=0,
            prefill_saved_sharing=0,
            prefill_saved_continuation=0,
            busy_s=0.0,
        )

    @property
    def stats(self) -> dict[str, Any]:
        s = dict(self._stats)
        s["tokens_per_s"] = s["generated_tokens"] / s["busy_s"] if s["busy_s"] else 0.0
        steps = s["decode_steps"] * self.config.num_slots
        s["occupancy"] = s["active_slot_steps"] / steps if steps else 0.0
        s["kept_pages"] = sum(len(p) for p, _ in self._kept.values())
        s["free_pages"] = self.pages.free
        return s

    # --- requests ---------------------------------------------------------------------------------------

    def submit(self, request: Request) -> int:
        """Queue ``request``; returns its id. Raises ``ValueError`` for a request that could never run."""
        cfg = request.config
        prompt = [int(t) for t in request.prompt]
        request.prompt = prompt
        if not prompt:
            raise ValueError("a request needs at least one prompt token")
        if any(t < 0 or t >= self.model_config.vocab_size for t in prompt):
            raise ValueError(f"prompt token ids must be in [0, {self.model_config.vocab_size})")
        if cfg.stop_strings and self.tokenizer is None:
            raise ValueError("stop strings need the Engine to be built with a tokenizer")
        if request.parent is not None:
            if request.parent not in self._kept:
                raise ValueError(
                    f"request {request.parent} has no kept cache to continue (not finished, not submitted "
                    "with keep_cache=True, or already continued/released)"
                )
            if any(r.parent == request.parent for r in map(self._requests.get, self._waiting)):
                raise ValueError(f"request {request.parent} is already being continued")
            _continue.check_prefix(prompt, KeptIds(self._kept[request.parent][1]), 0)
        need = len(prompt) + cfg.max_new_tokens - 1
        pages = _paged.pages_for(need, self.config.page_size)
        if need > self.config.max_seq_len or pages > self.config.num_pages:
            raise ValueError(
                f"request needs {need} KV positions ({len(prompt)} prompt + {cfg.max_new_tokens} new - 1) = "
                f"{pages} pages but the engine holds at most {self.config.max_seq_len} per request and "
                f"{self.config.num_pages} pages of {self.config.page_size} in its kv_budget_tokens="
                f"{self.config.kv_budget_tokens}"
            )
        rid = self._next_id
        self._next_id += 1
        self._requests[rid] = request
        self._waiting.append(rid)
        return rid

    def release(self, rid: int) -> None:
        """Free the kept KV pages of finished request ``rid`` (no-op if none)."""
        if any(self._requests[w].parent == rid for w in self._waiting):
            raise ValueError(f"request {rid}'s kept cache is named by a waiting continuation")
        pages, _ = self._kept.pop(rid, ([], ()))
        self.pages.give(pages)

    def cancel(self, rid: int) -> None:
        """Drop request ``rid`` before it is admitted (its parent's cache stays kept)."""
        if rid not in self._waiting:
            raise ValueError(f"request {rid} is not waiting (unknown, running or finished)")
        self._waiting.remove(rid)
        del self._requests[rid]

    @property
    def busy(self) -> bool:
        return bool(self._waiting or self._running)

    def run_until_done(self) -> dict[int, Result]:
        while self.busy:
            self.step()
        return self.results

    def step(self) -> list[Result]:
        """Admit, decode one segment, retire. Returns the requests that finished in this step."""
        t0 = time.perf_counter()
        self._admit()
        finished = self._retire()
        if any(not r["done"] for r in self._running.values()):
            self._segment()
            finished += self._retire()
        self._stats["busy_s"] += time.perf_counter() - t0
        return finished

    # --- admission and prefill --------------------------------------------------------------------------

    def _mode(self):
        modes = {
            (r["cfg"].top_k, r["cfg"].top_p_candidates) for r in self._running.values() if not r["greedy"]
        }
        return next(iter(modes), None)

    def _admit(self) -> None:
        c = self.config
        if not c.continuous and self._running:
            return
        mode, admitted = self._mode(), []
        free = [s for s in range(c.num_slots) if self.slots.owner[s] < 0]
        while self._waiting and free:
            rid = self._waiting[0]
            req = self._requests[rid]
            greedy = req.config.temperature == 0.0
            m = (req.config.top_k, req.config.top_p_candidates)
            if not greedy and mode is not None and m != mode:
                break  # compile-time sampling constants differ: wait for the running sampled requests
            kept = self._kept.get(req.parent, ([], ()))[0] if req.parent is not None else []
            need = _paged.pages_for(len(req.prompt) + req.config.max_new_tokens - 1, c.page_size)
            if need - len(kept) > self.pages.free:
                break  # FIFO: the head waits for pages (later requests do not overtake it)
            mode = mode if greedy else m
            self._waiting.pop(0)
            if req.parent is not None:
                pages, cached = self._kept.pop(req.parent)
                pages = pages + self.pages.take(need - len(pages))
            else:
                pages, cached = self.pages.take(need), ()
            admitted.append((rid, free.pop(0), pages, len(cached)))
        if not admitted:
            if self._waiting and not self._running and any(s[0] is None for s in self._sources.values()):
                self._drop_held(keep_wanted=False)  # held prompt pages block the head: prefill it instead
                return self._admit()
            if self._waiting and not self._running:
                kept = sum(len(p) for p, _ in self._kept.values())
                raise PagesBlocked(
                    f"request {self._waiting[0]} cannot start: {self.pages.free} free pages, {kept} held by "
                    "kept caches; release() finished requests' caches"
                )
            return
        self._start(admitted)

    def _start(self, admitted) -> None:
        c = self.config
        rows, copies, logits_of = [], [], {}
        for rid, slot, pages, cached in admitted:
            req = self._requests[rid]
            self.slots.assign(slot, rid, pages, req, self.model_config)
            key = tuple(req.prompt)
            src = self._sources.get(key) if c.prefix_sharing and req.parent is None else None
            if src is not None and (src[0] is None or self.slots.owner[src[0]] == src[1]):
                copies.append((rid, slot, src))
            else:
                rows.append((rid, slot, cached))
                if c.prefix_sharing and req.parent is None:
                    self._sources[key] = (slot, rid, None)  # logits filled in after the prefill
        if rows:
            logits = self._run_prefill(rows)
            for i, (rid, slot, _) in enumerate(rows):
                logits_of[rid] = logits[i]
                key = tuple(self._requests[rid].prompt)
                if self._sources.get(key, (None, None))[1] == rid:
                    self._sources[key] = (slot, rid, logits[i])
        if copies:
            src_p, dst_p = [], []
            for rid, slot, (s_slot, s_pages, _) in copies:
                n = _paged.pages_for(len(self._requests[rid].prompt), c.page_size)
                src_p += self.slots.table[s_slot, :n].tolist() if s_slot is not None else s_pages[:n]
                dst_p += self.slots.table[slot, :n].tolist()
                logits_of[rid] = self._sources[tuple(self._requests[rid].prompt)][2]
                self._stats["prefill_saved_sharing"] += len(self._requests[rid].prompt)
            size = bucket(len(src_p), (8, 16, 32, 64))
            pad = [c.num_pages] * (size - len(src_p))  # trash to trash
            self.pool = self._copy(
                self.pool, jnp.asarray(src_p + pad, jnp.int32), jnp.asarray(dst_p + pad, jnp.int32)
            )
        self._drop_held(keep_wanted=True)
        self._first_tokens([(rid, slot) for rid, slot, *_ in admitted], logits_of)

    def _wanted(self, prompt: tuple[int, ...]) -> bool:
        return any(
            r.parent is None and tuple(r.prompt) == prompt for r in map(self._requests.get, self._waiting)
        )

    def _drop_held(self, keep_wanted: bool) -> None:
        """Free held prompt pages of finished sources (those a waiting request still wants: if asked)."""
        for key, (slot, pages, _) in list(self._sources.items()):
            if slot is None and not (keep_wanted and self._wanted(key)):
                self.pages.give(pages)
                del self._sources[key]

    def _run_prefill(self, rows):
        """Prefill the uncached tokens of ``rows`` [(id, slot, cached)]; returns the last logits [n, V]."""
        news = [(self._requests[rid].prompt[cached:], cached) for rid, _, cached in rows]
        t = bucket(max(len(x) for x, _ in news), self.config.prefill_buckets)
        b = bucket(len(rows), self.batch_buckets)
        tables = self.slots.table[[slot for _, slot, _ in rows]]
        arrays = _paged.prefill_batch(news, tables, b, t, self.config.num_pages)
        self._stats["prefill_tokens"] += sum(len(x) for x, _ in news)
        self._stats["prefill_saved_continuation"] += sum(cached for _, _, cached in rows)
        logits, self.pool = self._prefill(
            self.state, self.pool, *map(jnp.asarray, arrays), graphdef=self.graphdef
        )
        self._stats["prefill_calls"] += 1
        return logits

    def _prefill_impl(self, state, pool, tokens, positions, write, table, last, *, graphdef):
        model = cast_params(nnx.merge(graphdef, state), self.model_config.compute_jnp_dtype)
        hidden, pool = _paged.paged_forward(model, tokens, positions, write, pool, table)
        h = jnp.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]
        return model.logits(h), pool

    def _first_tokens(self, started, logits_of) -> None:
        """Draw each started request's first token from its prompt's last-position logits."""
        b = bucket(len(started), self.batch_buckets)
        logits = jnp.stack([logits_of[rid] for rid, _ in started])
        if b > len(started):
            logits = jnp.concatenate([logits, jnp.zeros((b - len(started), logits.shape[1]), logits.dtype)])
        s = self.slots
        idx = np.array([slot for _, slot in started] + [started[0][1]] * (b - len(started)))
        greedy = s.greedy[idx]
        sampled = [self._requests[rid].config for rid, slot in started if not s.greedy[slot]]
        tok, lp = self._first(
            logits,
            jnp.asarray(s.keydata[idx]),
            jnp.zeros((b,), jnp.int32),
            jnp.asarray(s.temperature[idx]),
            jnp.asarray(s.top_p[idx]),
            jnp.asarray(greedy),
            top_k=sampled[0].top_k if sampled else 0,
            use_top_p=any(cfg.top_p < 1.0 for cfg in sampled),
            candidates=sampled[0].top_p_candidates if sampled else 256,
            all_greedy=not sampled,
        )
        tok, lp = jax.device_get((tok, lp))
        for i, (rid, slot) in enumerate(started):
            req = self._requests[rid]
            st = dict(
                slot=slot,
                cfg=req.config,
                greedy=bool(s.greedy[slot]),
                tokens=[int(tok[i])],
                logprobs=[float(lp[i])],
                done=False,
                finish=None,
                scanner=None,
            )
            if req.config.stop_strings:
                st["scanner"] = StopScanner(self.tokenizer, req.config.stop_strings)
            self._running[rid] = st
            s.start(slot, int(tok[i]), len(req.prompt))
            self._check_finish(rid, 0)

    # --- decode -------------------------------------------------------------------------------------------

    def _check_finish(self, rid: int, start: int) -> None:
        """Host-side finish of tokens[start:] (EOS, length, stop string) after the device's own checks."""
        st = self._running[rid]
        cfg, toks = st["cfg"], st["tokens"]
        eos = self.slots.eos_ids(cfg, self.model_config)
        for j in range(start, len(toks)):
            if toks[j] in eos:
                st.update(done=True, finish=EOS)
                del toks[j + 1 :], st["logprobs"][j + 1 :]
                break
        if not st["done"] and len(toks) >= cfg.max_new_tokens:
            st.update(done=True, finish=LENGTH)
        if st["scanner"] is not None:
            end = st["scanner"].first_stop(toks, start)
            if end is not None:
                st.update(done=True, finish=STOP)
                del toks[end:], st["logprobs"][end:]
        if st["done"]:
            self.slots.finish(st["slot"])

    def _segment(self) -> None:
        s, c = self.slots, self.config
        sampled = [r["cfg"] for r in self._running.values() if not r["greedy"] and not r["done"]]
        static = (
            c.segment_steps,
            sampled[0].top_k if sampled else 0,
            any(cfg.top_p < 1.0 for cfg in sampled),
            sampled[0].top_p_candidates if sampled else 256,
            not sampled,
        )
        out, self.pool = self._decode(
            self.state, self.pool, s.device_args(), graphdef=self.graphdef, static=static
        )
        seg_tok, seg_lp, count, steps, active = jax.device_get(out)
        self._stats["segments"] += 1
        self._stats["decode_steps"] += int(steps)
        self._stats["active_slot_steps"] += int(active)
        for rid, st in list(self._running.items()):
            if st["done"]:
                continue
            slot, n = st["slot"], int(count[st["slot"]])
            start = len(st["tokens"])
            st["tokens"] += seg_tok[slot, :n].tolist()
            st["logprobs"] += seg_lp[slot, :n].tolist()
            s.advance(slot, st["tokens"][-1], n)
            self._check_finish(rid, start)

    def _decode_impl(self, state, pool, args, *, graphdef, static):
        model = cast_params(nnx.merge(graphdef, state), self.model_config.compute_jnp_dtype)
        return _paged.decode_segment(model, pool, args, static)

    # --- retirement ---------------------------------------------------------------------------------------

    def _retire(self) -> list[Result]:
        out = []
        for rid, st in list(self._running.items()):
            if not st["done"]:
                continue
            req = self._requests.pop(rid)
            del self._running[rid]
            pages = self.slots.free(st["slot"])
            ids = tuple(req.prompt) + tuple(st["tokens"][:-1])  # the last token was never fed back
            if req.keep_cache:
                n = _paged.pages_for(len(ids), self.config.page_size)
                self._kept[rid] = (pages[:n], ids)
                pages = pages[n:]
            key = tuple(req.prompt)
            src = self._sources.get(key)
            if src is not None and src[1] == rid:
                del self._sources[key]
                if not req.keep_cache and self._wanted(key):  # later samples of this prompt copy these
                    n = _paged.pages_for(len(key), self.config.page_size)
                    self._sources[key] = (None, pages[:n], src[2])
                    pages = pages[n:]
            self.pages.give(pages)
            res = Result(
                id=rid,
                prompt_ids=list(req.prompt),
                response_ids=list(st["tokens"]),
                logprobs=np.asarray(st["logprobs"], np.float32),
                finish_reason=FINISH_NAMES[st["finish"]],
                kept=req.keep_cache,
            )
            self.results[rid] = res
            self._stats["generated_tokens"] += len(res.response_ids)
            out.append(res)
        return out

    # --- Sampler-compatible batch call -------------------------------------------------------------------

    def generate(self, prompts, config: SamplingConfig | None = None, *, seed: int = 0) -> SampleOutput:
        """Like ``Sampler.generate`` (same outputs for greedy decoding); prompt i draws with
        ``fold_in(key(seed), i)``. Identical prompts share their prefill."""
        config = config or SamplingConfig()
        base = jax.random.key(seed)
        ids = [
            self.submit(Request(list(p), config, key=jax.random.fold_in(base, i)))
            for i, p in enumerate(prompts)
        ]
        before = dict(self._stats)
        while any(i not in self.results for i in ids):
            self.step()
        res = [self.results.pop(i) for i in ids]
        stats = {k: v - before[k] for k, v in self._stats.items()}
        return sample_output(res, config.max_new_tokens, self.model_config.pad_token_id or 0, stats)
