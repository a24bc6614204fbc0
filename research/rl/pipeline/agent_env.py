"""The real agent loop as a rollout source of the staged pipeline (``env=agent``).

Each rollout batch draws ``episodes / group_size`` tasks (``group_size`` episodes each, one ``group`` id per
task, so GRPO / RLOO / TRLOO have groups) and plays every episode through ``research.agent.run_episode``: the
same prompts, tools, sandbox workspace, budgets and final fresh evaluation as ``python -m experiments.agent``.
The policy is ``research.agent``'s Flax policy over the pipeline's sampler, which holds the learner's current
parameters (``Runtime.sampler`` swaps them in before every batch; nothing is reloaded or recompiled). Its
batcher runs in lockstep: every generation call holds all live episodes, ordered by episode, with a seed of
the batch's cursor, so a resumed run samples what the uninterrupted one did. One turn (``rollout.turns=1``)
is CUDA Agent's single-turn mode: one generation, its code block judged.

Trajectories are ``research.rollout.Trajectory`` records (built by the policy's ``TrajectoryBuilder``), with
the sampling config recorded, per-turn tool calls and their validity, and the final verdict.

``agent.generation.backend=engine`` plays the episodes over a ``models.Engine`` instead (``make_sampler``
builds it for ``rollout.max_len`` tokens; ``Runtime.sampler`` swaps the learner's weights into it the same
way): continuous batching, KV pages kept per episode, each turn drawn from its episode's own key (so a
resumed run samples what the uninterrupted one did without lockstep batches).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

import models
from kernels_env.client import JudgeConfig
from kernels_env.session import WorkspaceSession
from research.agent import Budgets, GenerationConfig, SkillLibrary, Task, run_episode, tool_specs
from research.agent.policies.flax_policy import FlaxPolicy
from research.rollout import Trajectory, stable_seed


@dataclass
class AgentEnvConfig:
    """The agent loop's settings in training (the stage's rollout sets turns, context and tokens per
    turn): skills on/off, skill hits per query, the bytes of one observation, an episode's wall time."""

    skills: bool = False
    skill_results: int = 3
    max_observation_bytes: int = 4096
    max_wall_s: float = 1800.0
    # Start every workspace with model_new.py = ``class ModelNew(Model)`` beside the reference (correct,
    # no custom kernel): the final verdict judges a real candidate even when the policy writes none
    # (benchmarks of a random-weight policy use it to cost the judge; off in training).
    seed_solution: bool = False
    # the policy's generation backend: sampler | engine (research.agent.GenerationConfig holds the knobs)
    generation: GenerationConfig = field(default_factory=GenerationConfig)

    def __post_init__(self) -> None:
        if self.max_observation_bytes < 64 or self.max_wall_s <= 0 or self.skill_results < 1:
            raise ValueError("agent: max_observation_bytes >= 64, max_wall_s > 0, skill_results >= 1")


def _buckets(limit: int, start: int) -> tuple[int, ...]:
    out, b = [], start
    while b < limit:
        out.append(b)
        b *= 2
    return (*out, limit)


class _Seat:
    """The policy as one episode sees it: its row key, group and split passed to ``start``; records
    whether the episode registered with the batcher (else its reservation is given back)."""

    def __init__(self, policy: FlaxPolicy, key: int, group, split: str):
        self.policy, self.key, self.group, self.split = policy, key, group, split
        self.started = False

    def start(self, task_id, messages, tools):
        ep = self.policy.start(task_id, messages, tools, key=self.key, group=self.group, split=self.split)
        self.started = True
        return ep


class AgentEnv:
    """Tasks by split (``research.agent.Task``), the sandbox client, the judge of tools and final verdicts,
    the learner's tokenizer and chat template, and the loop's settings."""

    def __init__(
        self,
        splits: dict[str, list[Task]],
        client,
        judge: JudgeConfig,
        tokenizer,
        template,
        cfg: AgentEnvConfig,
        draw_splits: tuple[str, ...] | None = None,
    ):
        self.splits = {k: list(v) for k, v in splits.items()}
        # a study protocol's run draws rollouts from train only (None: any split the config names)
        self.draw_splits = draw_splits
        self.client, self.judge, self.cfg = client, judge, cfg
        self.tokenizer, self.template = tokenizer, template
        self.tools = tool_specs(cfg.skills)
        self._skills = None
        self.timings: dict[str, float] = {}  # of the last rollout call

    def tasks(self, split: str) -> list[Task]:
        if not self.splits.get(split):
            have = {k: len(v) for k, v in self.splits.items()}
            raise ValueError(f"no agent tasks in split {split!r} (tasks per split: {have})")
        return self.splits[split]

    def draw(self, cfg, cursor: int) -> list[Task]:
        """The tasks of rollout batch ``cursor``: episodes / group_size tasks, group_size episodes each."""
        if self.draw_splits is not None and cfg.split not in self.draw_splits:
            raise ValueError(
                f"rollout.split={cfg.split}: with tasks.protocol rollouts draw only from "
                f"{list(self.draw_splits)}"
            )
        pool = self.tasks(cfg.split)
        n = cfg.episodes // cfg.group_size
        rng = np.random.default_rng([cfg.seed, int(cursor)])
        idx = rng.choice(len(pool), n, replace=len(pool) < n)
        return [pool[i] for i in idx for _ in range(cfg.group_size)]

    def make_sampler(self, model, cfg) -> models.Sampler | models.Engine:
        """Batch buckets up to the batch's episodes, context buckets up to the context budget (a context
        that reaches it ends the episode), so the batch never outgrows its largest program. With
        ``generation.backend=engine``: an engine whose requests hold up to ``cfg.max_len`` tokens."""
        gen = self.cfg.generation
        if gen.backend == "engine":
            return models.Engine(
                model, gen.engine_config(cfg.max_len, where="agent"), tokenizer=self.tokenizer
            )
        return models.Sampler(
            model,
            tokenizer=self.tokenizer,
            prompt_buckets=_buckets(-(-cfg.max_context // 64) * 64, 128),
            batch_buckets=_buckets(cfg.episodes, 1),
        )

    def skills(self):
        if self.cfg.skills and self._skills is None:
            self._skills = SkillLibrary()
        return self._skills

    def _initial(self, task: Task) -> dict[str, str] | None:
        if not self.cfg.seed_solution:
            return None
        return {"model_new.py": task.path.read_text() + "\n\nclass ModelNew(Model):\n    pass\n"}

    def rollout(self, sampler, cfg, cursor: int, tasks=None, groups=None) -> list[Trajectory]:
        """One batch of episodes (``tasks``/``groups`` given: those, e.g. an evaluation's; else drawn).
        Episodes the infrastructure broke (an exception outside the loop's own handling) are left out,
        counted in ``timings['episode_errors']``; ``kept`` lists the tasks of the trajectories returned."""
        if tasks is None:
            tasks = self.draw(cfg, cursor)
            groups = [f"{cursor}:{i // cfg.group_size}" for i in range(len(tasks))]
        groups = list(groups if groups is not None else range(len(tasks)))
        if len(tasks) > cfg.episodes:  # e.g. an evaluation split: batches of the sampler's largest bucket
            out, timings, kept = [], {}, []
            for i in range(0, len(tasks), cfg.episodes):
                out += self.rollout(
                    sampler, cfg, cursor, tasks[i : i + cfg.episodes], groups[i : i + cfg.episodes]
                )
                timings = {k: timings.get(k, 0.0) + v for k, v in self.timings.items()}
                kept += [i + k for k in self.kept]
            self.timings, self.kept = timings, kept
            return out
        policy = FlaxPolicy(
            None,
            self.tokenizer,
            template=self.template,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_tokens=cfg.max_turn_tokens,
            batch_buckets=_buckets(max(len(tasks), 1), 1),
            keep_cache=True,
            seed=stable_seed(cfg.seed, int(cursor)),
            lockstep=True,
            sampler=sampler,
        )
        budgets = Budgets(
            max_turns=cfg.turns,
            max_context_tokens=cfg.max_context,
            max_wall_s=self.cfg.max_wall_s,
            max_observation_bytes=self.cfg.max_observation_bytes,
        )
        skills = self.skills()
        errors: list[str] = []

        def one(i: int) -> Trajectory | None:
            task = tasks[i]
            seat = _Seat(policy, i, groups[i], task.split)
            try:
                with WorkspaceSession(task.path, client=self.client, initial_files=self._initial(task)) as ws:
                    res = run_episode(
                        task.id,
                        task.path.read_text(),
                        seat,
                        ws,
                        budgets,
                        self.judge,
                        skills=skills,
                        level=task.level,
                        single_turn=cfg.turns == 1,
                        skill_results=self.cfg.skill_results,
                    )
            except Exception as exc:  # the loop handles the policy's and tools' errors; this is the machine
                errors.append(f"{task.id}: {type(exc).__name__}: {exc}")
                return None
            finally:
                if not seat.started:
                    policy.batcher.release(1)
            traj = res.trajectory
            traj.info.update(res.context())
            return traj

        t0 = time.perf_counter()
        policy.batcher.reserve(len(tasks))
        try:
            with ThreadPoolExecutor(max(len(tasks), 1), thread_name_prefix="agent-episode") as pool:
                out = list(pool.map(one, range(len(tasks))))
        finally:
            policy.close()
        wall = time.perf_counter() - t0
        gen = sum(c["seconds"] for c in policy.batcher.calls)
        trajs = [t for t in out if t is not None]
        short = [t for t in trajs if not t.turns and t.end_reason == "context_budget"]
        if short:
            raise ValueError(
                f"rollout.max_context={cfg.max_context} tokens is smaller than the prompt of task "
                f"{short[0].task_id} ({len(short[0].prompt_ids)} tokens with its tools): raise the stage's "
                "rollout.max_context"
            )
        self.kept = [i for i, t in enumerate(out) if t is not None]  # which tasks ``trajs`` are of
        self.timings = {
            "rollout_s": wall,
            "generate_s": gen,
            "tools_s": sum(t.info["timings"].get("tools_s", 0.0) for t in trajs),
            "judge_s": sum(t.info["timings"].get("judge_s", 0.0) for t in trajs),
            "generate_calls": float(len(policy.batcher.calls)),
            "generated_tokens": float(sum(c["generated_tokens"] for c in policy.batcher.calls)),
            "episode_errors": float(len(errors)),
        }
        self.errors = errors
        return trajs
