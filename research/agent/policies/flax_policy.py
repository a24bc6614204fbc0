"""Our Flax decoder as the policy, token-in-token-out: each episode keeps its context as token ids from the
first prompt on (policy tokens with their sampler log-probs, observation tokens appended from the chat
template's append-only delta), the sampler checks every new prompt extends the cached one and prefills only
the new tokens (its KV cache is kept across turns), and the generation of all waiting episodes runs as one
batched sampler call (``GenerationBatcher``). Token bookkeeping is ``research.rollout.TrajectoryBuilder``'s:
``tokens()`` is the episode's builder, which the loop finishes into a :class:`research.rollout.Trajectory`.

In RL rollouts (``research.rl.pipeline.agent_env``) the policy runs in ``lockstep`` (reproducible batches)
over the pipeline's sampler (``sampler=``, which holds the learner's current weights) and
``start(..., key=, group=)`` orders an episode's rows and tags its trajectory.

``generation`` (``research.agent.GenerationConfig``) picks the generation backend: the sampler's batches
above, or ``models.Engine`` (``EngineDriver``: continuous batching, each episode's KV cache kept in the
engine's pages, its turns drawn from its own key). Both hand the same tokens and log-probs to the same
``TrajectoryBuilder``; only where the KV cache lives differs."""

from __future__ import annotations

import time
from pathlib import Path

from research.rollout import Sampling, TrajectoryBuilder, stable_seed

from ..actions import Action
from ..config import GenerationConfig
from .base import Policy, PolicyEpisode
from .batcher import GenerationBatcher
from .chat import TINY_TEMPLATE, ChatFormat, parse_tool_calls
from .engine_driver import EngineDriver

RANDOM_MODELS = ("tiny", "qwen2_0_5b_random")


def load_policy_model(name: str, dtype: str = "bfloat16", tokenizer: str = "", seed: int = 0):
    """(model, tokenizer, chat template override) for ``tiny``, ``qwen2_0_5b_random`` (random weights, the
    bundled tokenizer and :data:`TINY_TEMPLATE`), a Hugging Face checkpoint directory (its tokenizer and
    template; e.g. a training run's ``final_policy``) or a ``models`` checkpoint directory (``model.json``:
    its tokenizer files if saved beside it, else the bundled tokenizer with :data:`TINY_TEMPLATE`)."""
    import models

    if name in RANDOM_MODELS:
        make = models.tiny_config if name == "tiny" else models.qwen2_0_5b_config
        model = models.init_model(make(compute_dtype=dtype), seed=seed)
        tok = models.load_tokenizer(tokenizer) if tokenizer else models.default_tokenizer()
        return model, tok, None if tokenizer else TINY_TEMPLATE
    path = Path(name)
    if not path.is_dir():
        raise FileNotFoundError(
            f"policy.model {name!r} is neither {RANDOM_MODELS} nor a checkpoint directory"
        )
    if (path / "model.json").is_file():
        model = models.restore_checkpoint(path, compute_dtype=dtype)
        tok_dir = tokenizer or (str(path) if (path / "tokenizer_config.json").is_file() else "")
        tok = models.load_tokenizer(tok_dir) if tok_dir else models.default_tokenizer()
        return model, tok, None if tok_dir else TINY_TEMPLATE
    model, _ = models.load_hf(name, compute_dtype=dtype)
    return model, models.load_tokenizer(tokenizer or name), None


class FlaxPolicy(Policy):
    name = "flax"

    def __init__(
        self,
        model,
        tokenizer,
        *,
        template: str | None = None,
        temperature: float = 0.7,
        top_p: float = 1.0,
        max_tokens: int = 1024,
        batch_buckets=(1, 2, 4, 8, 16, 32, 64),
        prompt_buckets=None,
        max_wait_s: float = 0.05,
        keep_cache: bool = True,
        seed: int = 0,
        lockstep: bool = False,
        sampler=None,
        generation: GenerationConfig | None = None,
        max_context: int = 131_072,
    ):
        """``sampler``: a ``models.Sampler`` or ``models.Engine`` to use (RL: it holds the learner's
        weights); else one is built from ``model`` as ``generation`` says (an engine for contexts of
        ``max_context`` + ``max_tokens`` tokens)."""
        import models

        self.chat = ChatFormat(tokenizer, template)
        generation = generation or GenerationConfig()
        kw = {"prompt_buckets": tuple(prompt_buckets)} if prompt_buckets else {}
        if sampler is None and generation.backend == "engine":
            sampler = models.Engine(
                model, generation.engine_config(max_context + max_tokens), tokenizer=tokenizer
            )
        if sampler is None:
            sampler = models.Sampler(model, tokenizer=tokenizer, batch_buckets=tuple(batch_buckets), **kw)
        self.sampler = sampler
        self.engine = sampler if isinstance(sampler, models.Engine) else None
        self.sampling = models.SamplingConfig(
            max_new_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            eos_token_ids=self.chat.stop_ids(),
        )
        # Recorded in every trajectory; the learner computes its log-probs at this temperature.
        self.record = Sampling(temperature=temperature, top_p=top_p, max_new_tokens=max_tokens)
        self.keep_cache = keep_cache
        if self.engine is not None:
            self.batcher = EngineDriver(
                self.engine, self.sampling, keep_cache=keep_cache, seed=seed, max_wait_s=max_wait_s
            )
        else:
            self.batcher = GenerationBatcher(
                self.sampler,
                self.sampling,
                keep_cache=keep_cache,
                max_batch=max(batch_buckets),
                max_wait_s=max_wait_s,
                seed=seed,
                lockstep=lockstep,
            )

    @property
    def model_config(self):
        return self.engine.model_config if self.engine is not None else self.sampler.config

    def describe(self):
        cfg = self.model_config
        out = {"name": self.name, "family": cfg.family, "layers": cfg.num_layers, "hidden": cfg.hidden_size}
        return out | ({"generation": "engine"} if self.engine is not None else {})

    def start(self, task_id, messages, tools, *, key=0, group=None, split="train"):
        # the engine draws each episode from its own stream: the row key alone repeats across tasks
        # (experiments.agent starts every episode with key 0)
        key = stable_seed(task_id, key) if self.engine is not None else key
        return FlaxEpisode(self, self.chat.prompt_ids(messages, tools), tools, task_id, key, group, split)

    def close(self):
        self.batcher.close()


class FlaxEpisode(PolicyEpisode):
    def __init__(self, policy: FlaxPolicy, prompt_ids, tools, task_id="", key=0, group=None, split="train"):
        self.policy, self.tools, self.key = policy, tools, key
        self.builder = TrajectoryBuilder(
            prompt_ids, task_id=task_id, group=group, split=split, sampling=policy.record
        )
        self.cache = None
        policy.batcher.register()

    @property
    def ids(self) -> list[int]:
        return self.builder.ids

    def act(self, messages):
        started = time.perf_counter()
        context = self.ids
        try:
            out, lps, finish, cache = self.policy.batcher.generate(context, self.cache, self.key)
        except Exception as exc:
            return Action(error=f"{type(exc).__name__}: {exc}", finish_reason="error")
        self.cache = cache  # the sampler's kept cache (None without keep_cache) or the engine's request id
        self.builder.policy(out, lps, finish)
        content, calls = parse_tool_calls(self.policy.chat.decode(out), len(self.builder.turns))
        return Action(
            text=content,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else finish,
            usage={"prompt_tokens": len(context), "completion_tokens": len(out)},
            latency_s=time.perf_counter() - started,
        )

    def observe(self, new_messages, results=None):
        ids = self.ids
        self.builder.observe(
            self.policy.chat.observation_ids(new_messages, self.tools, ids[-1] if ids else None)
        )

    def context_tokens(self, messages):
        return len(self.builder)

    def tokens(self):
        """The episode's trajectory so far (``research.rollout.Trajectory``; the loop finishes it)."""
        return self.builder

    def close(self):
        cache, self.cache = self.cache, None
        self.policy.batcher.unregister(cache)
