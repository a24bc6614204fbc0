"""Cold-start SFT on demonstration trajectories: the optional stage before CUDA Agent's staged RL.

A demonstration is one line of a ``trajectories.jsonl`` that ``python -m experiments.agent`` wrote (any
policy; OpenAI-endpoint demos carry only chat messages). :func:`render_demo` renders its messages with the
LEARNER's tokenizer and chat template into a :class:`research.rollout.Trajectory` whose tokens are exactly
what the Flax policy holds in the agent loop for the same turns: the first prompt through the template
(``ChatFormat.prompt_ids``), each assistant message as the policy tokens a sampler would have generated after
``<|im_start|>assistant\\n`` (the template's delta, its end-of-turn token included), and the messages after it
(tool results, user notes) as observation tokens (``ChatFormat.observation_ids``, masked out of the loss).
:func:`demo_trajectories` reads and filters a demos file; :func:`sft_batches` packs the kept ones for
``Learner.rft_step`` (NLL on ``response_mask`` tokens only).

Turn boundaries are tokenised apart, as in the agent loop: a turn's text is encoded on its own, never merged
with the generation prompt before it. Where the template renders something that BPE would merge across a
boundary (TINY_TEMPLATE's empty content before a ``<tool_call>`` gives ``assistant\\n\\n``), the ids differ
from tokenising the whole conversation at once, by design; the rendered TEXT always equals the whole
conversation's rendering, and a template that rewrites earlier turns is a :class:`TemplateError`.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from research.agent.policies.chat import END_OF_TURN, ChatFormat, TemplateError
from research.rollout import Trajectory, TrajectoryBuilder

from .._batch import PackConfig, RLBatch, pack_trajectories
from .._config import LearnerConfig, OptimConfig
from .._rewards import NON_POLICY_STATUSES, DropCounter, Dropped, RewardConfig

TRAJECTORIES = "trajectories.jsonl"  # research.agent.runner's file name in a run directory
# The agent loop's own "the final evaluation failed" verdict (research.agent.episode.final_verdict) is not
# the demonstrator's doing either.
DEMO_DROP_STATUSES = (*NON_POLICY_STATUSES, "sandbox_error")
# T of a packed batch is rounded up to a multiple of this (or of max_len when smaller): few distinct shapes
# to compile without padding every batch of short demos to max_len.
PAD_TO = 256


class DemoFileError(ValueError):
    """A demonstrations file that cannot be read as research.agent trajectories (names file and line)."""


@dataclass
class SFTConfig:
    """Cold-start SFT: ``epochs`` passes over the kept demonstrations, ``batch_size`` per optimizer step."""

    demos: str | None = None  # a trajectories.jsonl, or a run directory holding one
    min_reward: float | None = None  # keep demos whose reward > min_reward; None keeps all (reward None too)
    epochs: int = 2
    batch_size: int = 8
    max_len: int = 4096  # prompt + response tokens; longer demos are dropped and counted, never cut
    learner: LearnerConfig = field(
        default_factory=lambda: LearnerConfig(actor=OptimConfig(lr=1e-5), critic=OptimConfig(lr=1e-4))
    )  # the critic is unused
    save_every: int = 10


# --- rendering -------------------------------------------------------------------------------------------
_PROBE_ARGS = '{"a": 1}'


def _arguments_as_text(chat: ChatFormat) -> bool:
    """Whether the template writes tool-call ``arguments`` given as JSON text verbatim (TINY_TEMPLATE,
    Qwen3) or needs them as an object (Qwen2.5 applies ``tojson``, which would quote JSON text)."""
    call = {"id": "p", "type": "function", "function": {"name": "f", "arguments": _PROBE_ARGS}}
    msgs = [{"role": "user", "content": "U"}, {"role": "assistant", "content": "A", "tool_calls": [call]}]
    try:
        if _PROBE_ARGS in chat.render(msgs):
            return True
    except Exception:  # a template that cannot concatenate text arguments (jinja's own errors): try an object
        pass
    call["function"]["arguments"] = json.loads(_PROBE_ARGS)
    if _PROBE_ARGS not in chat.render(msgs):
        raise TemplateError(
            "the chat template renders tool-call arguments neither from JSON text nor from an object "
            f"as {_PROBE_ARGS}; demonstrations with tool calls cannot be rendered with it"
        )
    return False


def _for_template(messages: list[dict], as_text: bool) -> list[dict]:
    """Messages with their tool calls' arguments in the form the template renders as a JSON object."""
    if as_text:
        return messages
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                # malformed JSON stays text, as the demonstrator wrote it
                with contextlib.suppress(ValueError):
                    if isinstance(fn.get("arguments"), str):
                        fn["arguments"] = json.loads(fn["arguments"] or "{}")
                calls.append({**c, "function": fn})
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


def render_demo_text(chat: ChatFormat, messages: list[dict], tools) -> str:
    """The whole demonstration as the template renders it (text, as a tokenizer's training corpus sees it)."""
    return chat.render(_for_template(list(messages), _arguments_as_text(chat)), tools)


def render_demo(
    chat: ChatFormat, messages: list[dict], tools, *, task_id: str = "", reward: float | None = None
) -> Trajectory:
    """One demonstration (OpenAI chat messages) as a learner trajectory: policy tokens (log-probs 0.0) are
    the assistant turns as the template renders them through ``<|im_end|>``, observation tokens everything
    after each turn up to the next one's generation prompt; messages after the last assistant turn are not
    kept (nothing follows them to learn). ``reward`` is kept as given (None included).

    Raises ``Dropped("no_assistant_turn")`` / ``Dropped("end_of_turn_in_text")`` (an assistant text holding
    ``<|im_end|>``, which no sampler could produce) and :class:`TemplateError` for a template that does not
    render the conversation append-only."""
    msgs = _for_template(list(messages), _arguments_as_text(chat))
    turns = [i for i, m in enumerate(msgs) if m.get("role") == "assistant"]
    if not turns:
        raise Dropped("no_assistant_turn")
    b = TrajectoryBuilder(chat.prompt_ids(msgs[: turns[0]], tools), task_id=task_id)
    for k, i in enumerate(turns):
        before = chat.render(msgs[:i], tools, add_generation_prompt=True)
        after = chat.render(msgs[: i + 1], tools)
        if not after.startswith(before):
            raise TemplateError(
                f"demo {task_id!r}: the chat template renders assistant turn {k} (message {i}) so that the "
                "conversation before it changes (no append-only delta after the generation prompt)"
            )
        delta = after[len(before) :]
        cut = delta.rfind(END_OF_TURN)
        if cut < 0:
            raise TemplateError(
                f"demo {task_id!r}: the template ends assistant turn {k} without {END_OF_TURN}"
            )
        ids = chat.encode(delta[: cut + len(END_OF_TURN)])
        if ids.count(chat.eot_id) != 1 or ids[-1] != chat.eot_id:
            raise Dropped("end_of_turn_in_text")
        b.policy(ids, [0.0] * len(ids), finish="tool_calls" if msgs[i].get("tool_calls") else "stop")
        if k + 1 < len(turns):
            b.observe(chat.observation_ids(msgs[i + 1 : turns[k + 1]], tools, ids[-1]))
    full = chat.render(msgs[: turns[-1] + 1], tools)
    full = full[: full.rfind(END_OF_TURN) + len(END_OF_TURN)]
    got = chat.tok.decode(b.ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if got != full:
        raise TemplateError(
            f"demo {task_id!r}: the turn-by-turn tokens do not spell the rendered conversation (the "
            "template's rendering of tool results depends on the turns before them)"
        )
    traj = b.build(None, info={"source": "demo"})
    traj.reward = reward
    return traj


# --- the demos file --------------------------------------------------------------------------------------
def demos_path(demos: str | None) -> Path:
    if not demos:
        raise DemoFileError("sft.demos is not set: give a trajectories.jsonl or a run directory holding one")
    path = Path(demos)
    if path.is_dir():
        path = path / TRAJECTORIES
        if not path.is_file():
            raise FileNotFoundError(f"{demos}: the run directory holds no {TRAJECTORIES}")
    elif not path.is_file():
        raise FileNotFoundError(f"{demos}: no such demonstrations file")
    return path


def _read_demo(path: Path, n: int, line: str) -> dict[str, Any]:
    where = f"{path}:{n}"
    try:
        rec = json.loads(line)
    except ValueError as exc:
        raise DemoFileError(f"{where}: not a JSON line ({exc})") from None
    if not isinstance(rec, dict):
        raise DemoFileError(f"{where}: a JSON {type(rec).__name__}, not a trajectory object")
    msgs = rec.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise DemoFileError(f"{where}: no 'messages' list (not a research.agent trajectory record)")
    for j, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise DemoFileError(f"{where}: message {j} is not a chat message with a 'role'")
    verdict = rec.get("verdict")
    if verdict is not None and not isinstance(verdict, dict):
        raise DemoFileError(f"{where}: verdict is not an object")
    reward = rec.get("reward", (verdict or {}).get("reward"))
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
        raise DemoFileError(f"{where}: reward {reward!r} is not a number")
    return {**rec, "reward": reward}


def demo_trajectories(
    cfg: SFTConfig, chat: ChatFormat, tools, train_tasks: set[str] | None = None
) -> tuple[list[Trajectory], DropCounter]:
    """The demonstrations of ``cfg.demos`` rendered for the learner, and the count of dropped ones by
    reason: a non-policy verdict status (the status), ``no_reward`` / ``non_finite_reward`` /
    ``below_min_reward`` (with ``min_reward``), ``no_assistant_turn``, ``end_of_turn_in_text``,
    ``too_long`` (over ``max_len``). A kept demo whose reward is None gets 0.0: SFT never reads it, and
    packing needs a number. ``train_tasks`` (a study protocol's train split): a demo of any other task is
    dropped (``not_a_train_task``), so no dev or test task is cloned. Each keeps its file and line in
    ``info["source"]`` and its verdict in ``info["verdict"]`` (not as ``Trajectory.verdict``: a demo's
    reward is given, not judged again)."""
    path = demos_path(cfg.demos)
    kept, drops, seen = [], DropCounter(), 0
    with path.open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            seen += 1
            rec = _read_demo(path, n, line)
            verdict, reward = rec.get("verdict"), rec["reward"]
            status = (verdict or {}).get("status")
            if status in DEMO_DROP_STATUSES:
                drops[str(status)] += 1
                continue
            if reward is not None and not math.isfinite(reward):
                drops["non_finite_reward"] += 1
                continue
            if cfg.min_reward is not None:
                if reward is None:
                    drops["no_reward"] += 1
                    continue
                if not reward > cfg.min_reward:
                    drops["below_min_reward"] += 1
                    continue
            task = str(rec.get("task", ""))
            if train_tasks is not None and task not in train_tasks:
                drops["not_a_train_task"] += 1
                continue
            try:
                traj = render_demo(chat, rec["messages"], tools, task_id=task, reward=reward)
            except Dropped as d:
                drops[d.reason] += 1
                continue
            except TemplateError as exc:
                raise TemplateError(f"{path}:{n}: {exc}") from None
            except Exception as exc:  # jinja's own errors: a message the template cannot render
                raise DemoFileError(
                    f"{path}:{n}: the chat template cannot render this demo ({type(exc).__name__}: {exc})"
                ) from exc
            if len(traj.prompt_ids) + len(traj.response_ids) > cfg.max_len:
                drops["too_long"] += 1
                continue
            traj.reward = 0.0 if reward is None else float(reward)
            traj.end_reason = str(rec.get("end_reason") or "")
            traj.info.update(source=f"{path}:{n}", verdict=verdict)
            kept.append(traj)
    if not seen:
        raise DemoFileError(f"{path}: no demonstrations (the file is empty)")
    return kept, drops


# --- batches ---------------------------------------------------------------------------------------------
def _record(t: Trajectory, i: int) -> dict[str, Any]:
    return {
        "prompt_ids": t.prompt_ids,
        "response_ids": t.response_ids,
        "response_mask": t.response_mask,
        "logprobs": t.logprobs,
        "turn_ids": t.turn_ids,
        "reward": 0.0 if t.reward is None else t.reward,
        "group": i,
    }


def sft_batches(
    trajs: list[Trajectory], cfg: SFTConfig, pad_id: int, rows_multiple: int = 1, packing: bool = False
) -> list[RLBatch]:
    """One epoch of batches of ``cfg.batch_size`` demos (shuffled with ``cfg.learner.seed``; B rounded up
    to ``rows_multiple`` with rows that hold no policy token). The stage runs ``cfg.epochs`` passes over
    them (``len(batches) * epochs`` steps of ``Learner.rft_step``), as the RFT stage does. ``packing``:
    rows of ``max_len`` holding several demos, B a bucket of ``rows_multiple`` (``PackConfig.capacity``)."""
    if not trajs:
        return []
    order = np.random.default_rng(cfg.learner.seed).permutation(len(trajs))
    pack = PackConfig(
        max_len=cfg.max_len,
        pad_to=min(PAD_TO, cfg.max_len),
        rows_multiple=rows_multiple,
        pad_id=pad_id,
        max_turns=max(len(t.turns) for t in trajs),
        packing=packing,
        capacity=cfg.batch_size if packing else None,
    )
    batches = []
    for s in range(0, len(order), cfg.batch_size):
        idx = order[s : s + cfg.batch_size]
        batch, drops, _ = pack_trajectories([_record(trajs[i], int(i)) for i in idx], RewardConfig(), pack)
        if drops:  # demo_trajectories already dropped what packing would: losing a demo here is a bug
            raise ValueError(
                f"packing dropped demonstrations {dict(drops)} (render them with demo_trajectories)"
            )
        batches.append(batch)
    return batches


__all__ = [
    "DEMO_DROP_STATUSES",
    "DemoFileError",
    "SFTConfig",
    "demo_trajectories",
    "demos_path",
    "render_demo",
    "sft_batches",
]
