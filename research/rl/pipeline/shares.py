"""Rollouts split across JAX processes (``research.rl.initialize_distributed``).

Every process draws the same tasks (``env.draw``: the same seed and cursor), plays its share of the
episodes (episode ``i`` of ``n`` processes goes to share ``i mod n``) with its own sampler (a local copy of
the learner's weights, ``Runtime.sampler``) and its own sandbox client, and gets every share's trajectories
back (``allgather_objects`` of ``Trajectory.to_dict()``) in the draw's episode order, with the draw's group
ids. So every process packs the same global batch, which is what ``research.rl.Learner.put`` expects.

One process: ``split_env`` returns the environment itself, called exactly as before. Share ``s`` of ``n``
samples with its own seed (``share_seed``: shares of one seed would draw the same tokens for the same
prompt, and a group split over two processes would collapse into copies) and a sampler batch of
``ceil(episodes / n)`` rows (``share_rollout``), so ``n`` processes sample a different (equally valid)
batch than one process does. ``timings`` of a split rollout: seconds are the slowest share's (the shares
run at the same time), counts (calls, tokens, episode errors) the sum over shares.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

from research.rollout import RolloutConfig, Trajectory, stable_seed

from .._distributed import allgather_objects


def share_seed(seed: int, share: int, count: int) -> int:
    """The sampling seed of share ``share`` of ``count`` (one share: ``seed`` itself)."""
    return seed if count == 1 else stable_seed("share", seed, share, count)


def share_rollout(cfg: RolloutConfig, count: int) -> RolloutConfig:
    """The rollout config one share plays (its sampler's batch): ``cfg`` itself for one share. Group ids
    come from the full draw, so ``group_size`` is 1 here (a share holds parts of groups)."""
    if count == 1:
        return cfg
    return dataclasses.replace(cfg, episodes=-(-cfg.episodes // count), group_size=1)


def merge_timings(per_share: Sequence[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in per_share:
        for k, v in t.items():
            out[k] = max(out.get(k, v), v) if k.endswith("_s") else out.get(k, 0.0) + v
    return out


def json_copy(objs: list) -> list:
    """``allgather_objects`` of one process as several processes see it (through JSON)."""
    return json.loads(json.dumps(objs))


class SharedEnv:
    """``env`` (``ToyEnv`` or ``AgentEnv``) with its rollouts split into ``count`` shares, of which this
    process plays ``mine`` (one: its process index; all of them: one process replaying an ``count``-process
    run), the rest coming from ``gather``. Everything else is the environment's."""

    def __init__(self, env, count: int, mine: Sequence[int], gather: Callable[[list], list]):
        self.env, self.count, self.mine, self.gather = env, count, list(mine), gather
        self.timings: dict[str, float] = {}  # of the last rollout (see the module doc)
        self.played: dict[int, list[int]] = {}  # share -> the draw's episodes it played (last rollout)

    def __getattr__(self, name):
        if name == "env":  # not set yet (a copy being built): no recursion through self.env
            raise AttributeError(name)
        return getattr(self.env, name)

    def rollout(self, sampler, cfg: RolloutConfig, cursor: int, tasks=None, groups=None) -> list[Trajectory]:
        if tasks is None:
            tasks = self.env.draw(cfg, cursor)
            groups = [f"{cursor}:{i // cfg.group_size}" for i in range(len(tasks))]  # the envs' own ids
        elif groups is None:
            raise ValueError("a split rollout of given tasks needs their groups")
        tasks, groups = list(tasks), list(groups)
        part = share_rollout(cfg, self.count)
        payload = []
        for s in self.mine:
            idx = list(range(s, len(tasks), self.count))
            if not idx:
                payload.append({"share": s, "episodes": [], "timings": {}})
                continue
            recs = self.env.rollout(
                sampler,
                dataclasses.replace(part, seed=share_seed(cfg.seed, s, self.count)),
                cursor,
                tasks=[tasks[i] for i in idx],
                groups=[groups[i] for i in idx],
            )
            # AgentEnv leaves out episodes the infrastructure broke and names the ones it kept
            kept = getattr(self.env, "kept", None)
            kept = range(len(recs)) if kept is None else kept
            if len(kept) != len(recs):
                raise RuntimeError(f"share {s}: {len(recs)} trajectories for {len(kept)} kept episodes")
            episodes = [[idx[k], r.to_dict()] for k, r in zip(kept, recs)]
            payload.append({"share": s, "episodes": episodes, "timings": dict(self.env.timings)})
        shares = self.gather(payload)
        self.played = {p["share"]: [e[0] for e in p["episodes"]] for p in shares}
        self.timings = merge_timings([p["timings"] for p in shares])
        episodes = sorted((e for p in shares for e in p["episodes"]), key=lambda e: e[0])
        return [Trajectory.from_dict(d) for _, d in episodes]


def split_env(env, count: int | None = None, mine: Sequence[int] | None = None, gather=None):
    """``env`` split over the JAX processes (``count``/``mine``/``gather`` default to them); one share:
    ``env`` itself."""
    import jax

    count = jax.process_count() if count is None else count
    if count == 1:
        return env
    mine = [jax.process_index()] if mine is None else mine
    return SharedEnv(env, count, mine, gather or allgather_objects)
