"""Our Flax decoder as the policy, token-in-token-out: each episode keeps its context as token ids from the
first prompt on (policy tokens with their sampler log-probs, observation tokens appended from the chat
template's append-only delta), the sampler checks every new prompt extends the cached one and prefills only
the new tokens (its KV cache is kept across turns), and the generation of all waiting episodes runs as one
batched sampler call (``GenerationBatcher``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..actions import Action
from .base import Policy, PolicyEpisode
from .batcher import GenerationBatcher
from .chat import TINY_TEMPLATE, ChatFormat, parse_tool_calls

RANDOM_MODELS = ("tiny", "qwen2_0_5b_random")


def load_policy_model(name: str, dtype: str = "bfloat16", tokenizer: str = "", seed: int = 0):
    """(model, tokenizer, chat template override) for ``tiny``, ``qwen2_0_5b_random`` (random weights, the
    bundled tokenizer and :data:`TINY_TEMPLATE`) or a Hugging Face checkpoint directory (its template)."""
    import models

    if name in RANDOM_MODELS:
        make = models.tiny_config if name == "tiny" else models.qwen2_0_5b_config
        model = models.init_model(make(compute_dtype=dtype), seed=seed)
        tok = models.load_tokenizer(tokenizer) if tokenizer else models.default_tokenizer()
        return model, tok, None if tokenizer else TINY_TEMPLATE
    if not Path(name).is_dir():
        raise FileNotFoundError(
            f"policy.model {name!r} is neither {RANDOM_MODELS} nor a checkpoint directory"
        )
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
        max_tokens: int = 1024,
        batch_buckets=(1, 2, 4, 8, 16, 32, 64),
        prompt_buckets=None,
        max_wait_s: float = 0.05,
        keep_cache: bool = True,
        seed: int = 0,
    ):
        import models

        self.chat = ChatFormat(tokenizer, template)
        kw = {"prompt_buckets": tuple(prompt_buckets)} if prompt_buckets else {}
        self.sampler = models.Sampler(model, tokenizer=tokenizer, batch_buckets=tuple(batch_buckets), **kw)
        self.sampling = models.SamplingConfig(
            max_new_tokens=max_tokens, temperature=temperature, eos_token_ids=self.chat.stop_ids()
        )
        self.keep_cache = keep_cache
        self.batcher = GenerationBatcher(
            self.sampler,
            self.sampling,
            keep_cache=keep_cache,
            max_batch=max(batch_buckets),
            max_wait_s=max_wait_s,
            seed=seed,
        )

    def describe(self):
        cfg = self.sampler.config
        return {"name": self.name, "family": cfg.family, "layers": cfg.num_layers, "hidden": cfg.hidden_size}

    def start(self, task_id, messages, tools):
        return FlaxEpisode(self, self.chat.prompt_ids(messages, tools), tools)

    def close(self):
        self.batcher.close()


class FlaxEpisode(PolicyEpisode):
    def __init__(self, policy: FlaxPolicy, prompt_ids: list[int], tools):
        self.policy, self.tools = policy, tools
        self.prompt_ids = list(prompt_ids)
        self.response_ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.turns: list[dict[str, int]] = []  # [start, end) of each policy turn in response_ids
        self.cache = None
        self.turn = 0
        policy.batcher.register()

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    def act(self, messages):
        started = time.perf_counter()
        context = self.ids
        try:
            out, lps, finish, cache = self.policy.batcher.generate(context, self.cache)
        except Exception as exc:
            return Action(error=f"{type(exc).__name__}: {exc}", finish_reason="error")
        self.cache = cache if self.policy.keep_cache else None
        start = len(self.response_ids)
        self.response_ids += out
        self.mask += [1] * len(out)
        self.logprobs += lps
        self.turns.append({"start": start, "end": len(self.response_ids)})
        self.turn += 1
        content, calls = parse_tool_calls(self.policy.chat.decode(out), self.turn)
        return Action(
            text=content,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else finish,
            usage={"prompt_tokens": len(context), "completion_tokens": len(out)},
            latency_s=time.perf_counter() - started,
        )

    def observe(self, new_messages, results=None):
        last = self.response_ids[-1] if self.response_ids else None
        obs = self.policy.chat.observation_ids(new_messages, self.tools, last)
        self.response_ids += obs
        self.mask += [0] * len(obs)
        self.logprobs += [0.0] * len(obs)

    def context_tokens(self, messages):
        return len(self.prompt_ids) + len(self.response_ids)

    def tokens(self) -> dict[str, Any]:
        return {
            "prompt_ids": self.prompt_ids,
            "response_ids": self.response_ids,
            "response_mask": self.mask,
            "logprobs": self.logprobs,
            "turns": self.turns,
        }

    def close(self):
        self.cache = None
        self.policy.batcher.unregister()
