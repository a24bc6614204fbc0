"""Rollouts split across JAX processes (research.rl.pipeline.shares), in one process: the split and merge
order against a fake environment, the shares' seeds, and the single-process path left exactly as it was.
The two-process run itself is tests/rl/test_distributed.py's (integration tier)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from pipeline_fixtures import SMALL_TASKS, RuleJudge

import models
from research import rl
from research.rl import pipeline as pl
from research.rl.pipeline.shares import (
    SharedEnv,
    json_copy,
    merge_timings,
    share_rollout,
    share_seed,
    split_env,
)
from research.rollout import Trajectory
from research.toyenv import baseline_plan, make_tasks

RO = pl.RolloutConfig(turns=2, episodes=8, group_size=2, max_turn_tokens=48, max_context=96, seed=7)


class FakeEnv:
    """Draws like the environments (episodes / group_size tasks, group_size episodes each); each episode's
    trajectory records the task, group, cursor, seed and place it was played at; ``drop``: tasks whose
    episodes the infrastructure "broke" (left out, as AgentEnv does, with ``kept`` naming the rest)."""

    def __init__(self, pool, drop=()):
        self.pool, self.drop, self.calls, self.timings = pool, set(drop), [], {}

    def draw(self, cfg, cursor):
        rng = np.random.default_rng([cfg.seed, int(cursor)])
        idx = rng.choice(len(self.pool), cfg.episodes // cfg.group_size, replace=False)
        return [self.pool[i] for i in idx for _ in range(cfg.group_size)]

    def rollout(self, sampler, cfg, cursor, tasks=None, groups=None):
        k = len(self.calls)
        self.calls.append({"cfg": cfg, "cursor": cursor, "tasks": list(tasks), "groups": list(groups)})
        self.kept = [i for i, t in enumerate(tasks) if t not in self.drop]
        self.timings = {"generate_s": 1.0 + k, "judge_s": 10.0 - k, "generate_calls": 2.0}
        return [
            Trajectory(
                task_id=tasks[i],
                prompt_ids=[1, 2],
                response_ids=[3],
                response_mask=[1],
                logprobs=[-0.1 * (i + 1)],
                group=groups[i],
                info={"seed": cfg.seed, "cursor": cursor, "at": i, "call": k},
            )
            for i in self.kept
        ]


POOL = [f"task{i}" for i in range(10)]


def _share_env(env, count=3):
    return SharedEnv(env, count, list(range(count)), json_copy)  # one process replaying `count` of them


def test_shares_play_strided_episodes_and_merge_back_in_draw_order():
    env = FakeEnv(POOL)
    split = _share_env(env)
    out = split.rollout("sampler", RO, 5)
    draw = env.draw(RO, 5)
    groups = [f"5:{i // 2}" for i in range(8)]  # the draw's group ids, as ToyEnv/AgentEnv make them
    assert [r.task_id for r in out] == draw and [r.group for r in out] == groups
    assert [c["tasks"] for c in env.calls] == [draw[0::3], draw[1::3], draw[2::3]]
    assert [c["groups"] for c in env.calls] == [groups[0::3], groups[1::3], groups[2::3]]
    assert split.played == {0: [0, 3, 6], 1: [1, 4, 7], 2: [2, 5]}  # disjoint, covering the draw
    # each share: its own seed (the same prompt twice must not draw the same tokens), the cursor, a sampler
    # batch of ceil(8 / 3) rows
    seeds = [c["cfg"].seed for c in env.calls]
    assert seeds == [share_seed(RO.seed, s, 3) for s in range(3)] and len(set(seeds + [RO.seed])) == 4
    assert {(c["cursor"], c["cfg"].episodes, c["cfg"].turns) for c in env.calls} == {(5, 3, 2)}
    assert [r.info["seed"] for r in out] == [seeds[i % 3] for i in range(8)]
    assert [r.logprobs for r in out] == [[-0.1 * (i // 3 + 1)] for i in range(8)]  # its place in its share
    # seconds: the slowest share's (they run at once); counts: summed
    assert split.timings == {"generate_s": 3.0, "judge_s": 10.0, "generate_calls": 6.0}


def test_left_out_episodes_keep_the_others_in_draw_order():
    draw = FakeEnv(POOL).draw(RO, 2)
    env = FakeEnv(POOL, drop={draw[2]})  # episodes 2 and 3 (one group), played by shares 0 and 1
    out = _share_env(env, 2).rollout("sampler", RO, 2)
    keep = [i for i in range(8) if i not in (2, 3)]
    assert [r.task_id for r in out] == [draw[i] for i in keep]
    assert [r.group for r in out] == [f"2:{i // 2}" for i in keep]


def test_given_tasks_split_unevenly_and_need_their_groups():
    env = FakeEnv(POOL)
    tasks, groups = POOL[:3], ["a", "b", "c"]  # an evaluation: three tasks over two shares
    out = _share_env(env, 2).rollout("sampler", RO, 0, tasks=tasks, groups=groups)
    assert [(r.task_id, r.group) for r in out] == list(zip(tasks, groups))
    assert [c["tasks"] for c in env.calls] == [["task0", "task2"], ["task1"]]
    with pytest.raises(ValueError, match="needs their groups"):
        _share_env(env, 2).rollout("sampler", RO, 0, tasks=tasks)
    out = _share_env(FakeEnv(POOL), 4).rollout("sampler", RO, 0, tasks=tasks, groups=groups)  # a share idle
    assert [r.task_id for r in out] == tasks


def test_merge_timings_and_share_rollout():
    assert merge_timings([{"a_s": 1.0, "n": 2.0}, {}, {"a_s": 0.5, "n": 3.0}]) == {"a_s": 1.0, "n": 5.0}
    assert share_rollout(RO, 1) is RO
    assert share_rollout(RO, 3) == dataclasses.replace(RO, episodes=3, group_size=1)


def test_one_process_is_not_split():
    env = FakeEnv(POOL)
    assert split_env(env) is env  # jax.process_count() == 1 here: the environment itself, called as before
    objs = [{"a": 1}]
    assert rl.allgather_objects(objs) is objs


class SeededSampler:
    """A stand-in for models.Sampler whose draws depend on the seed, the row and the batch size as a real
    sampler's do: each row writes the task's baseline plan or junk, with seed-dependent log-probs."""

    def __init__(self, plan, junk):
        self.plan, self.junk, self.seeds = plan, junk, []

    def generate(self, prompts, config, seed=0):
        self.seeds.append(seed)
        rows, lps = [], []
        for i in range(len(prompts)):
            rng = np.random.default_rng([seed, i, len(prompts)])
            rows.append((self.plan if rng.random() < 0.5 else self.junk)[: config.max_new_tokens])
            lps.append(rng.uniform(-3, 0, len(rows[-1])).astype(np.float32))
        m = config.max_new_tokens
        toks, lp = np.zeros((len(rows), m), np.int32), np.zeros((len(rows), m), np.float32)
        for i, (r, x) in enumerate(zip(rows, lps)):
            toks[i, : len(r)], lp[i, : len(r)] = r, x
        lengths = np.array([len(r) for r in rows])
        finish = ["eos" if r[-1] == self.junk[-1] else "length" for r in rows]
        return models.SampleOutput(prompts, toks, lp, np.arange(m)[None] < lengths[:, None], lengths, finish)


@pytest.fixture(scope="module")
def toy():
    task = make_tasks(SMALL_TASKS).split("train")[0]
    tok = pl.toy_tokenizer()
    plan = tok.encode_plan(baseline_plan(task))
    junk = [tok.encode(["K"])[0]] * 3 + [tok.eos_id]
    return pl.ToyEnv({"train": [task]}, RuleJudge()), plan, junk


def test_one_share_through_the_split_path_equals_the_direct_call(toy):
    """The split path with one share (draw, group ids, tasks passed explicitly, JSON round trip) gives
    exactly what the environment gives when called directly: nothing is lost or changed on the way."""
    env, plan, junk = toy
    direct = env.rollout(SeededSampler(plan, junk), RO, 3)
    via = SharedEnv(env, 1, [0], json_copy).rollout(SeededSampler(plan, junk), RO, 3)
    assert [r.to_dict() for r in via] == [r.to_dict() for r in direct]
    assert {r.verdict["status"] for r in direct} >= {"correct", "invalid_plan"}  # the judge had work


def test_a_group_split_over_two_shares_samples_two_episodes(toy):
    """Episodes 0 and 1 are one task with the same prompt (a group), played by shares 0 and 1 at row 0
    of their batches: with one seed they would be copies; the shares' seeds tell them apart."""
    env, plan, junk = toy
    sampler = SeededSampler(plan, junk)
    out = _share_env(env, 2).rollout(sampler, RO, 0)
    assert out[0].group == out[1].group and out[0].prompt_ids == out[1].prompt_ids
    assert len({s for s in sampler.seeds}) == len(sampler.seeds)  # every generation call: its own seed
    assert len({tuple(r.logprobs) for r in out}) == len(out)


def test_the_runtime_of_one_process_is_unchanged_and_several_need_a_mesh(tmp_path, monkeypatch):
    cfg = pl.PipelineConfig(out_dir=str(tmp_path), tasks=SMALL_TASKS, judge_cache=None, progress=False)
    rt = pl.Runtime(cfg, judge=RuleJudge())
    assert type(rt.env) is pl.ToyEnv and type(rt.eval_env) is pl.ToyEnv and rt.shares == 1
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    with pytest.raises(rl.MeshError, match="2 JAX processes: the learners need a mesh"):
        pl.Runtime(cfg, judge=RuleJudge())
