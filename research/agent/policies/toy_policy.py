"""The toy plan policy of the RL pipeline (``research.rl.pipeline``, a ``models`` decoder over the toy
environment's 91 tokens) playing toy tasks through the real agent loop.

Each turn follows the toy environment's turn structure (``research.toyenv.rollout.ToyEnv``):

* the decoder samples a plan from ``<bos> task <sep>`` plus everything since (its own plans and the
  observation tokens of their verdicts), up to ``<eos>``;
* a plan is rendered by ``research.toyenv.render_plan`` (for the task at the size the workspace holds) and
  written with ``write_file(model_new.py)``; before the last of ``turns`` plans it is judged with
  ``benchmark`` (the verdict's status and speedups are what ToyEnv observed), whose verdict (the call's
  ``ToolResult.verdict``, not its text) becomes the observation tokens
  ``<obs> st_<status> e_<bucket> c_<bucket> <sep>``; a benchmark that gave no verdict (the sandbox failed)
  is ``st_other``; the last plan is written and submitted at once;
* a turn of only ``<eos>`` (after the first) submits the workspace as it stands (ToyEnv: the previous plan);
* a turn that is not a plan writes nothing (no tool call) and is observed as ``st_invalid_plan``; at the last
  turn the workspace as it stands is submitted.

The reward is the agent loop's fresh full evaluation of the workspace, like any episode. Where this differs
from ToyEnv: an invalid last plan leaves the previous plan in the workspace (ToyEnv scores the invalid plan
-1), and a plan naming ops the task does not have is judged by the sandbox (ToyEnv's judge calls it invalid
before judging). Token trajectory: ToyEnv's, kept by the same ``research.rollout.TrajectoryBuilder``
(``tokens()``: its ``prompt_ids`` / ``response_ids`` / ``response_mask`` / ``logprobs`` / ``turn_ids`` /
``turns`` / ``sampling``; a turn's ``action`` is its plan, ``invalid`` / ``hallucinated`` / ``stop`` as
ToyEnv sets them).
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from ..actions import Action, ToolCall
from .base import Policy, PolicyEpisode

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[2] / "toyenv" / "assets" / "toy_policy"
TRAINED_BY = "TRAINED_BY.json"
SOLUTION = "model_new.py"
INVALID, NO_VERDICT = "invalid_plan", "other"  # observation statuses (research.rl.pipeline.observations)


def observed_verdict(results) -> tuple[str, dict[str, float | None]]:
    """(status, speedups) the turn observes: those of its last ``benchmark`` call's verdict
    (``ToolResult.verdict``); ``other`` when it has none (the tool failed before a verdict)."""
    judged = [r for r in results or () if r.name == "benchmark"]
    verdict = judged[-1].verdict if judged else None
    if verdict is None:
        return NO_VERDICT, {}
    return verdict["status"], dict(verdict.get("speedups") or {})


class ToyPolicy(Policy):
    """``model``: a ``models.CausalLM`` over ``research.toyenv.toy_tokenizer()``; ``turns``: plans at
    most per episode; ``temperature`` 0: greedy (the pipeline's evaluation); ``max_plan_tokens``: a turn
    without ``<eos>`` within them is not a plan; ``max_context``: the sampler's one context bucket (a
    longer context submits)."""

    name = "toy"
    uses_skills = False  # write_file / benchmark / submit only

    def __init__(
        self,
        model,
        *,
        turns: int = 2,
        temperature: float = 0.0,
        max_plan_tokens: int = 32,
        max_context: int = 128,
        seed: int = 0,
        checkpoint: str | None = None,
    ):
        import models
        from research.toyenv import toy_tokenizer

        self.tok = toy_tokenizer()
        if model.config.vocab_size < len(self.tok):
            raise ValueError(
                f"the toy policy's vocabulary ({model.config.vocab_size}) does not cover the toy tokenizer's "
                f"{len(self.tok)} tokens"
            )
        self.turns, self.max_context, self.seed = turns, max_context, seed
        self.checkpoint = checkpoint
        self.sampling = models.SamplingConfig(
            max_new_tokens=max_plan_tokens, temperature=temperature, eos_token_ids=(self.tok.eos_id,)
        )
        # One batch and one context bucket: one compiled program; episodes take turns (a lock).
        self.sampler = models.Sampler(model, prompt_buckets=(max_context,), batch_buckets=(1,))
        self._lock = threading.Lock()
        self.tasks: dict[str, tuple[Any, Any]] = {}

    @classmethod
    def from_checkpoint(cls, path: str | Path = "", **kw) -> ToyPolicy:
        """The policy of a ``models`` checkpoint directory (default: the shipped one)."""
        import models

        path = Path(path) if path else DEFAULT_CHECKPOINT
        if not (path / "model.json").is_file():
            raise FileNotFoundError(f"policy.model {path} is not a models checkpoint (no model.json)")
        return cls(models.restore_checkpoint(path), checkpoint=str(path), **kw)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "model": self.checkpoint, "turns": self.turns}
        trained = Path(self.checkpoint) / TRAINED_BY if self.checkpoint else None
        if trained is not None and trained.is_file():
            out["trained_by"] = json.loads(trained.read_text())
        return out

    def prepare(self, tasks) -> None:
        other = [t.id for t in tasks if "toy_task" not in t.meta]
        if other:
            raise ValueError(
                f"policy=toy plays toy tasks only (tasks=toy_heldout); {len(other)} task(s) are not, e.g. "
                f"{other[0]!r}"
            )
        self.tasks.update({t.id: (t.meta["toy_task"], t.meta["toy_judged"]) for t in tasks})

    def start(self, task_id, messages, tools):
        if task_id not in self.tasks:
            raise ValueError(f"policy=toy plays toy tasks only (tasks=toy_heldout); {task_id!r} is not one")
        return ToyEpisode(self, task_id, *self.tasks[task_id])

    def generate(self, context: list[int], seed: int) -> tuple[list[int], list[float], str, list[int]]:
        """(tokens, their log-probs, finish reason, the context the sampler continued)."""
        with self._lock:
            out = self.sampler.generate([context], self.sampling, seed=seed)
        ids = out.response_ids(0)
        return ids, out.logprobs[0, : len(ids)].tolist(), out.finish_reasons[0], list(out.prompt_ids[0])


class ToyEpisode(PolicyEpisode):
    def __init__(self, policy: ToyPolicy, task_id: str, task, judged):
        from research.rollout import Sampling, TrajectoryBuilder

        self.policy, self.task_id, self.task, self.judged = policy, task_id, task, judged
        s = policy.sampling
        self.builder = TrajectoryBuilder(
            policy.tok.encode_prompt(task),  # the real task, as in training
            task_id=task_id,
            sampling=Sampling(temperature=s.temperature, max_new_tokens=s.max_new_tokens),
        )
        self.invalid = False  # the last turn was not a plan: its observation is st_invalid_plan

    def _call(self, name: str, **arguments) -> ToolCall:
        return ToolCall(f"call_{len(self.builder.turns)}_{name}", name, json.dumps(arguments))

    def act(self, messages):
        from research.toyenv import PlanError, render_plan

        p, b, started = self.policy, self.builder, time.perf_counter()
        context = b.ids
        if len(context) > p.max_context:  # ToyEnv ends such an episode: the workspace as it stands
            return Action("context bucket full: submit", [self._call("submit")], "tool_calls")
        n = len(b.turns)
        ids, lps, finish, seen = p.generate(context, p.seed + zlib.crc32(f"{self.task_id}:{n}".encode()))
        b.check_context(seen)  # the sampler continued the episode's tokens
        turn = b.policy(ids, lps, finish)
        last = n + 1 >= p.turns
        usage = {"prompt_tokens": len(context), "completion_tokens": len(ids)}
        submit = [self._call("submit")]
        error, source = None, None
        if finish != "eos":
            error = f"no <eos> within {p.sampling.max_new_tokens} tokens"
        elif len(ids) == 1 and n > 0:
            turn.stop = True
            return Action("<eos>: submit", submit, "tool_calls", usage, time.perf_counter() - started)
        else:
            try:
                plan = p.tok.decode_plan(ids)
                source = render_plan(self.judged, plan)
                turn.action = plan.text()
                turn.hallucinated = bool(set(plan.ops) - set(self.task.ops))
            except (PlanError, ValueError) as exc:
                error = str(exc)[:200]
        self.invalid = error is not None
        if error is not None:
            turn.error, turn.invalid = error, True
            return Action(
                f"not a plan ({error})",
                submit if last else [],
                "tool_calls" if last else "stop",
                usage,
                time.perf_counter() - started,
            )
        calls = [self._call("write_file", path=SOLUTION, content=source)]
        calls += submit if last else [self._call("benchmark")]
        return Action(f"plan: {turn.action}", calls, "tool_calls", usage, time.perf_counter() - started)

    def observe(self, new_messages, results=None):
        from research.toyenv import observation_tokens

        status, speedups = (INVALID, {}) if self.invalid else observed_verdict(results)
        self.builder.observe(self.policy.tok.encode(observation_tokens(status, speedups)))

    def context_tokens(self, messages):
        return len(self.builder)

    def tokens(self):
        """The episode's ``TrajectoryBuilder`` (the loop adds each turn's calls and verdicts and builds it;
        ``build`` cuts a trailing observation: it belongs to no turn, as in ToyEnv)."""
        return self.builder
