"""research.rollout: the one contract between the environments that produce episodes and the learner.

Every rollout source (the real agent loop, ``research.rl.pipeline.agent_env.AgentEnv``; the toy plan
environment, ``research.toyenv.rollout.ToyEnv``) turns a batch of tasks and the current policy into typed
:class:`Trajectory` records, each built by one :class:`TrajectoryBuilder` (token-in-token-out: the policy's
tokens with their sampler log-probs, observation tokens masked out, every new context checked to extend the
previous one). The learner packs them as they are (``research.rl.pack_trajectories``); RFT filters and
rollout metrics read their per-turn records (tool calls and their validity, hallucinated calls, the turn's
verdict); JSONL files hold ``Trajectory.to_dict()`` and are read back with :func:`read_trajectories`.

    b = TrajectoryBuilder(prompt_ids, task_id="level1/19_ReLU", group=3, sampling=Sampling(temperature=1.0))
    turn = b.policy(ids, logprobs, finish="eos")    # one assistant turn
    turn.calls.append(CallRecord(name="verify", ok=True, verdict=result_dict))
    b.observe(observation_ids)                      # tool results as the chat template renders them
    traj = b.build(final_verdict, end_reason="submitted")

A verdict is the sandbox's result as ``kernels_env.client.Result.to_dict()`` gives it, never reshaped.

May import: the standard library only (it sits under ``research.agent`` and ``research.rl`` alike).
"""

from ._trajectory import (
    CallRecord,
    RolloutConfig,
    Sampling,
    Trajectory,
    TrajectoryBuilder,
    TrajectoryError,
    Turn,
    as_trajectory,
    read_trajectories,
    stable_seed,
    write_trajectories,
)

__all__ = [
    "CallRecord",
    "RolloutConfig",
    "Sampling",
    "Trajectory",
    "TrajectoryBuilder",
    "TrajectoryError",
    "Turn",
    "as_trajectory",
    "read_trajectories",
    "stable_seed",
    "write_trajectories",
]
