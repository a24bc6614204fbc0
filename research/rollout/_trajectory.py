"""Typed trajectories and their one builder (see the package docstring)."""

from __future__ import annotations

import dataclasses
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def stable_seed(*parts) -> int:
    """A 31-bit seed of ``parts`` that is the same in every process and run (``hash`` is salted per
    process): rollout sources seed each batch, turn and share with it."""
    return zlib.crc32(repr(parts).encode()) & 0x7FFFFFFF


class TrajectoryError(ValueError):
    """A trajectory whose token bookkeeping is inconsistent (a context that does not extend the episode's
    tokens, arrays of different lengths, a turn without policy tokens)."""


@dataclass
class Sampling:
    """How the policy tokens were sampled: recorded in every trajectory, and the learner computes its
    log-probs at this temperature (a different one would make every ratio wrong by a constant)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 0  # per turn; 0: not recorded


@dataclass
class RolloutConfig:
    """One rollout batch of any source: ``episodes`` episodes, ``group_size`` per task (GRPO / RLOO /
    TRLOO groups), at most ``turns`` policy turns each (1: single-turn mode) of at most ``max_turn_tokens``
    tokens, a turn starting only while the context is under ``max_context`` tokens (the agent loop: its
    context budget; the toy environment: its sampler's one prompt bucket), sampled at ``temperature`` /
    ``top_p`` (recorded in every trajectory as :class:`Sampling`; the learner scores at the same
    temperature), tasks drawn from ``split`` with ``seed``."""

    turns: int = 1
    episodes: int = 16
    group_size: int = 4
    temperature: float = 1.0
    top_p: float = 1.0
    max_turn_tokens: int = 32  # toy: a turn without <eos> in this many tokens is not a plan
    max_context: int = 128
    split: str = "train"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.turns < 1 or self.episodes < 1 or self.group_size < 1:
            raise ValueError("turns, episodes and group_size must be >= 1")
        if not 0.0 < self.top_p <= 1.0 or self.temperature < 0 or self.max_turn_tokens < 1:
            raise ValueError("rollout: top_p in (0, 1], temperature >= 0 and max_turn_tokens >= 1")
        if self.episodes % self.group_size:
            raise ValueError(
                f"episodes ({self.episodes}) must be a multiple of group_size ({self.group_size})"
            )

    @property
    def max_len(self) -> int:
        """Longest packed episode: the last turn's context plus its tokens."""
        return self.max_context + self.max_turn_tokens

    def sampling(self) -> Sampling:
        return Sampling(temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_turn_tokens)


@dataclass
class CallRecord:
    """One tool call of a turn. ``valid``: its block and arguments parsed and, for an offered tool, fit
    the tool's schema; ``known``: it names a tool that was offered (else a hallucinated call; the two are
    RFT's two reasons, kept apart); ``verdict``: the structured sandbox result of a judging call (verify /
    benchmark), next to the text the model saw."""

    name: str
    ok: bool = False
    valid: bool = True
    known: bool = True
    error: str | None = None
    verdict: dict[str, Any] | None = None
    elapsed_s: float = 0.0
    truncated: bool = False


@dataclass
class Turn:
    """One policy turn: its policy tokens ``[start, end)`` in ``response_ids`` and what came of them.

    ``invalid``: not a valid action (a malformed or schema-violating tool call, no tool call at all, a toy
    plan that does not parse); ``hallucinated``: it names something the task does not offer (an unknown
    tool, a toy op the task lacks); ``stop``: it only submitted the previous action; ``action``: a short
    text of what was done (the toy plan); ``verdict``: the last sandbox verdict this turn produced."""

    start: int
    end: int
    finish: str = ""
    calls: list[CallRecord] = field(default_factory=list)
    invalid: bool = False
    hallucinated: bool = False
    stop: bool = False
    action: str | None = None
    verdict: dict[str, Any] | None = None
    error: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Turn:
        d = _older_toy_turn(dict(d))
        calls = [
            c if isinstance(c, CallRecord) else CallRecord(**_known(CallRecord, c))
            for c in d.pop("calls", [])
        ]
        return cls(calls=calls, **_known(cls, d))


@dataclass
class Trajectory:
    """One episode, token-in-token-out, in verl's layout.

    ``prompt_ids`` then ``response_ids``; ``response_mask`` 1 on policy tokens, 0 on observation tokens;
    ``logprobs`` the sampler's per response token (0 on observations); ``turn_ids`` the turn of each policy
    token (-1 on observations); ``turns`` one :class:`Turn` each; ``verdict`` the final sandbox verdict (the
    reward comes from it) or ``reward`` a reward already computed (demonstrations, synthetic batches);
    ``group``: episodes of one task in one batch share it (GRPO / RLOO / TRLOO); ``info``: what a source
    keeps for people (messages, usage, timings, the final plan)."""

    task_id: str
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    reward: float | None = None
    group: Any = None
    split: str = "train"
    end_reason: str = ""
    sampling: Sampling | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.response_ids)
        if not (len(self.response_mask) == len(self.logprobs) == n):
            raise TrajectoryError(
                f"trajectory {self.task_id}: response_ids ({n}), response_mask ({len(self.response_mask)}) "
                f"and logprobs ({len(self.logprobs)}) must have one entry per response token"
            )
        if self.turn_ids and len(self.turn_ids) != n:
            raise TrajectoryError(
                f"trajectory {self.task_id}: turn_ids has {len(self.turn_ids)} entries, not {n}"
            )

    @property
    def turn_verdicts(self) -> list[dict[str, Any] | None]:
        """One verdict (or None) per turn: what per-turn reward placement reads."""
        return [t.verdict for t in self.turns]

    @property
    def policy_tokens(self) -> int:
        return int(sum(self.response_mask))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        """A record as ``to_dict`` wrote it; records of older writers (``task`` for ``task_id``, turns
        without their own fields) read with the defaults."""
        d = dict(d)
        if "task_id" not in d:
            d["task_id"] = str(d.get("task", ""))
        turns = [t if isinstance(t, Turn) else Turn.from_dict(t) for t in d.pop("turns", None) or []]
        sampling = d.pop("sampling", None)
        if isinstance(sampling, dict):
            sampling = Sampling(**_known(Sampling, sampling))
        extra = {k: v for k, v in d.items() if k not in _FIELDS[cls]}
        kw = _known(cls, d)
        kw.setdefault("prompt_ids", [])
        traj = cls(turns=turns, sampling=sampling, **kw)
        traj.info = {**extra, **traj.info}
        return traj


def _older_toy_turn(d: dict[str, Any]) -> dict[str, Any]:
    """A turn as the toy rollout wrote it before this contract (RFT trajectories a resumed run reads
    again): its plan as ``plan``, its verdict flattened into ``status`` / ``reward`` / ``speedups``, a turn
    that was no plan by the status ``invalid_plan``."""
    if "status" in d and "verdict" not in d:
        d["verdict"] = {k: d[k] for k in ("status", "reward", "speedups", "error", "cached") if k in d}
        d.setdefault("invalid", d["status"] == "invalid_plan")
    if "plan" in d and "action" not in d:
        d["action"] = d["plan"]
    return d


def _known(cls, d: dict[str, Any]) -> dict[str, Any]:
    names = _FIELDS[cls]
    return {k: v for k, v in d.items() if k in names and k not in ("turns", "calls", "sampling")}


_FIELDS = {c: {f.name for f in dataclasses.fields(c)} for c in (CallRecord, Turn, Trajectory, Sampling)}


def as_trajectory(record: Trajectory | dict[str, Any]) -> Trajectory:
    """A :class:`Trajectory` (a dict record, e.g. a JSONL line, is read with ``Trajectory.from_dict``)."""
    return record if isinstance(record, Trajectory) else Trajectory.from_dict(record)


class TrajectoryBuilder:
    """The one place token bookkeeping happens: every source appends the policy's turns and the
    observations between them here, and checks each new context against the episode's tokens."""

    def __init__(
        self,
        prompt_ids: list[int],
        *,
        task_id: str,
        group: Any = None,
        split: str = "train",
        sampling: Sampling | None = None,
    ):
        if not prompt_ids:
            raise TrajectoryError(
                f"trajectory {task_id}: empty prompt (the first token cannot be a policy token)"
            )
        self.traj = Trajectory(
            task_id=task_id,
            prompt_ids=[int(t) for t in prompt_ids],
            group=group,
            split=split,
            sampling=sampling,
        )

    @property
    def ids(self) -> list[int]:
        """The episode's context now: prompt, then every policy and observation token."""
        return self.traj.prompt_ids + self.traj.response_ids

    @property
    def turns(self) -> list[Turn]:
        return self.traj.turns

    def __len__(self) -> int:
        return len(self.traj.prompt_ids) + len(self.traj.response_ids)

    def check_context(self, context: list[int]) -> None:
        """Token-in-token-out: the context a policy is about to continue must be the episode's tokens
        exactly (a re-tokenised or re-rendered history would train on tokens the policy never saw)."""
        if list(context) != self.ids:
            raise TrajectoryError(
                f"trajectory {self.traj.task_id}: the generation context ({len(context)} tokens) is not the "
                f"episode's tokens ({len(self)}): a history was re-rendered instead of extended"
            )

    def policy(self, ids: list[int], logprobs: list[float], finish: str = "") -> Turn:
        """Append one turn of policy tokens (with their sampler log-probs); returns its :class:`Turn`."""
        if len(ids) != len(logprobs):
            raise TrajectoryError(f"a turn of {len(ids)} tokens came with {len(logprobs)} log-probs")
        t = self.traj
        k, start = len(t.turns), len(t.response_ids)
        t.response_ids += [int(i) for i in ids]
        t.response_mask += [1] * len(ids)
        t.logprobs += [float(x) for x in logprobs]
        t.turn_ids += [k] * len(ids)
        turn = Turn(start=start, end=len(t.response_ids), finish=finish)
        t.turns.append(turn)
        return turn

    def observe(self, ids: list[int]) -> None:
        """Append observation tokens (tool results, verdict tokens): in the context, never trained on."""
        t = self.traj
        t.response_ids += [int(i) for i in ids]
        t.response_mask += [0] * len(ids)
        t.logprobs += [0.0] * len(ids)
        t.turn_ids += [-1] * len(ids)

    def build(self, verdict: dict[str, Any] | None = None, end_reason: str = "", **info) -> Trajectory:
        """The finished trajectory. A trailing observation (after the last turn) is trimmed: nothing
        follows it for the policy to learn from. Empty turns (no policy token) are refused."""
        t = self.traj
        while t.response_mask and t.response_mask[-1] == 0:
            for name in ("response_ids", "response_mask", "logprobs", "turn_ids"):
                getattr(t, name).pop()
        for k, turn in enumerate(t.turns):
            if turn.end <= turn.start:
                raise TrajectoryError(f"trajectory {t.task_id}: turn {k} has no policy token")
        t.verdict, t.end_reason = verdict, end_reason
        t.info.update(info)
        return t


def write_trajectories(path: str | os.PathLike, trajectories) -> None:
    """JSONL, one ``to_dict()`` per line, written to a temporary file and renamed (never half a file)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as f:
        for t in trajectories:
            f.write(json.dumps(as_trajectory(t).to_dict(), default=str) + "\n")
    tmp.replace(path)


def read_trajectories(path: str | os.PathLike) -> list[Trajectory]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no trajectories file")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Trajectory.from_dict(json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise TrajectoryError(f"{path}:{n}: not a trajectory record ({exc})") from None
    return out
