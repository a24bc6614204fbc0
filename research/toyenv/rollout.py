"""Token-level rollouts of a ``models`` decoder in the toy kernel environment.

Why not the chat agent loop of ``research.agent``: its tools are text (write_file, compile, ...) behind a
chat template, which a 69-token plan vocabulary cannot express. This rollout keeps the agent loop's
contract (``research.rollout``: one :class:`~research.rollout.Trajectory` per episode, built by a
:class:`~research.rollout.TrajectoryBuilder`, token-in-token-out) and its semantics:

* single turn (``turns=1``): ``<bos> task <sep>`` -> the policy writes ``PLAN <eos>`` -> the judge's verdict
  is the reward;
* multi-turn: after each plan, an observation of its verdict (``observations.py``, mask 0) and the policy
  writes a revised plan, up to ``turns`` plans; a turn that is only ``<eos>`` (after the first) submits the
  previous plan and ends the episode (``Turn.stop``). The final reward is the verdict of the last plan
  written, like CUDA Agent's final evaluation of the workspace.

The whole context is prefilled each turn (at most ``max_context`` tokens: cheaper than cache bookkeeping
at this size, and one compiled program per batch/context bucket). Per turn: ``Turn.action`` is the plan's
text, ``Turn.verdict`` its verdict; a turn is ``invalid`` when its tokens are not a plan (no ``<eos>`` in
``max_turn_tokens``, unknown tokens, a plan the task cannot take: verdict status ``invalid_plan``) and
``hallucinated`` when its plan names an op the task does not have; the RFT filters read both. A verdict
that is not the policy's doing ends the episode and is recorded under a status of
``research.rl.NON_POLICY_STATUSES`` (the sandbox's ``NO_VERDICT``, ``infra_error`` included), so packing
drops and counts it. ``Trajectory.end_reason``: ``submitted`` (a stop turn), ``max_turns``,
``context_budget`` (the context outgrew ``max_context``) or ``non_policy_verdict``; ``info["final_plan"]``:
the last plan judged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

import models
from kernels_env.client import INFRA_ERROR, NO_VERDICT
from research.rollout import RolloutConfig, Trajectory, TrajectoryBuilder, stable_seed

from .grammar import PlanError
from .observations import observation_tokens, toy_tokenizer
from .reward import INVALID_PLAN, Judgement
from .tasks import ToyTask

# research.rl.NON_POLICY_STATUSES beyond the sandbox's NO_VERDICT (research.toyenv does not import
# research.rl; a test checks the two agree).
SUBMITTED, MAX_TURNS, CONTEXT, NOT_POLICY = "submitted", "max_turns", "context_budget", "non_policy_verdict"


def make_sampler(model, cfg: RolloutConfig) -> models.Sampler:
    """A sampler with one batch and one context bucket (one compiled program per sampling mode)."""
    return models.Sampler(model, prompt_buckets=(cfg.max_context,), batch_buckets=(cfg.episodes,))


class ToyEnv:
    """The toy tasks by split, a judge (``research.toyenv.PlanJudge`` or anything with its ``judge_many``
    and ``invalid_reward``) and ``judge_task`` (the size a task is judged at: ``cpu_size`` in CPU mode;
    prompts always name the real task)."""

    def __init__(
        self, splits: dict[str, list[ToyTask]], judge, judge_task: Callable[[ToyTask], ToyTask] | None = None
    ):
        self.splits = {k: list(v) for k, v in splits.items()}
        self.judge = judge
        self.judge_task = judge_task or (lambda t: t)
        self.tokenizer = toy_tokenizer()
        self._judge_cache: dict[str, ToyTask] = {}
        self.timings = {"generate_s": 0.0, "judge_s": 0.0}  # of the last rollout call

    def tasks(self, split: str) -> list[ToyTask]:
        if split not in self.splits or not self.splits[split]:
            raise ValueError(f"no toy tasks in split {split!r} (have {sorted(self.splits)})")
        return self.splits[split]

    def draw(self, cfg: RolloutConfig, cursor: int) -> list[ToyTask]:
        """The tasks of rollout batch ``cursor``: episodes / group_size tasks, group_size episodes each."""
        pool = self.tasks(cfg.split)
        n = cfg.episodes // cfg.group_size
        rng = np.random.default_rng([cfg.seed, int(cursor)])
        idx = rng.choice(len(pool), n, replace=len(pool) < n)
        return [pool[i] for i in idx for _ in range(cfg.group_size)]

    def _judged(self, task: ToyTask) -> ToyTask:
        if task.id not in self._judge_cache:
            self._judge_cache[task.id] = self.judge_task(task)
        return self._judge_cache[task.id]

    def rollout(
        self,
        sampler: models.Sampler,
        cfg: RolloutConfig,
        cursor: int,
        tasks: Sequence[ToyTask] | None = None,
        groups: Sequence | None = None,
    ) -> list[Trajectory]:
        """One :class:`~research.rollout.Trajectory` per episode (see the module doc)."""
        tasks = list(tasks) if tasks is not None else self.draw(cfg, cursor)
        if groups is None:
            groups = [f"{cursor}:{i // cfg.group_size}" for i in range(len(tasks))]
        records = []
        self.timings = {"generate_s": 0.0, "judge_s": 0.0}
        for start in range(0, len(tasks), cfg.episodes):
            chunk = tasks[start : start + cfg.episodes]
            records += self._episodes(
                sampler, cfg, chunk, list(groups[start : start + cfg.episodes]), cursor, start
            )
        return records

    # --- one batch of episodes ------------------------------------------------------------------------
    def _episodes(self, sampler, cfg: RolloutConfig, tasks, groups, cursor, offset) -> list[Trajectory]:
        tok = self.tokenizer
        eps = [
            TrajectoryBuilder(
                tok.encode_prompt(t),
                task_id=t.id,
                group=g,
                split=t.split,
                sampling=cfg.sampling(),
            )
            for t, g in zip(tasks, groups)
        ]
        final: list[dict | None] = [None] * len(eps)  # the last verdict of each episode
        plans: list[str | None] = [None] * len(eps)  # the plan it judged
        ends = [MAX_TURNS] * len(eps)
        live = list(range(len(eps)))
        sampling = models.SamplingConfig(
            max_new_tokens=cfg.max_turn_tokens, temperature=cfg.temperature, eos_token_ids=(tok.eos_id,)
        )
        for turn in range(cfg.turns):
            for i in live:
                if len(eps[i]) > cfg.max_context:
                    ends[i] = CONTEXT
            live = [i for i in live if len(eps[i]) <= cfg.max_context]
            if not live:
                break
            t0 = time.perf_counter()
            out = sampler.generate(
                [eps[i].ids for i in live], sampling, seed=stable_seed(cfg.seed, cursor, offset, turn)
            )
            self.timings["generate_s"] += time.perf_counter() - t0
            parsed, judge_items = {}, []
            for row, i in enumerate(live):
                eps[i].check_context(out.prompt_ids[row])  # the sampler continued the episode's tokens
                ids, finish = out.response_ids(row), out.finish_reasons[row]
                t = eps[i].policy(ids, out.logprobs[row, : len(ids)].tolist(), finish)
                if finish != "eos":
                    t.error = f"no <eos> within {cfg.max_turn_tokens} tokens"
                    continue
                if len(ids) == 1 and turn > 0:  # only <eos>: submit the previous plan
                    t.stop = True
                    continue
                try:
                    plan = tok.decode_plan(ids)
                except (PlanError, ValueError) as exc:
                    t.error = str(exc)[:200]
                    continue
                t.action = plan.text()
                t.hallucinated = bool(set(plan.ops) - set(tasks[i].ops))
                parsed[i] = len(judge_items)
                judge_items.append((self._judged(tasks[i]), plan))
            t0 = time.perf_counter()
            verdicts = self.judge.judge_many(judge_items) if judge_items else []
            self.timings["judge_s"] += time.perf_counter() - t0
            still = []
            for i in live:
                t = eps[i].turns[-1]
                if t.stop:
                    ends[i] = SUBMITTED
                    continue
                j = (
                    verdicts[parsed[i]]
                    if i in parsed
                    else Judgement(INVALID_PLAN, self.judge.invalid_reward, error=t.error)
                )
                t.verdict, t.invalid = _verdict(j), j.status == INVALID_PLAN
                final[i], plans[i] = dict(t.verdict), t.action
                if j.dropped:  # not the policy's doing: the episode ends here and will be dropped
                    ends[i] = NOT_POLICY
                    continue
                if turn + 1 < cfg.turns:
                    eps[i].observe(tok.encode(observation_tokens(j.status, j.speedups)))
                    still.append(i)
            live = still
        # build() trims a trailing observation: it belongs to no turn (the last turn ends the episode)
        return [b.build(final[i], ends[i], final_plan=plans[i]) for i, b in enumerate(eps)]


def _verdict(j: Judgement) -> dict:
    """A turn's verdict: the judgement's, a dropped one under a status that packing drops."""
    status = j.status
    if j.dropped and status not in NO_VERDICT:  # not the policy's doing: the sandbox never answered
        status = INFRA_ERROR
    return {
        "status": status,
        "reward": j.reward,
        "speedups": dict(j.speedups),
        "error": j.error,
        "cached": j.cached,
    }
