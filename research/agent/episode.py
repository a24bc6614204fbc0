"""One episode: reason -> tool call -> observation until the policy submits or a budget ends it; then the
workspace as it stands is judged by a fresh full evaluation (``WorkspaceSession.evaluate``), never by
earlier tool output. Single-turn mode: one generation, its code block judged."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kernels_env.client import INFRA_ERROR, NO_SOLUTION, JudgeConfig, Result
from kernels_env.session import WorkspaceSession
from research.rollout import CallRecord, Trajectory, TrajectoryBuilder, Turn

from . import prompts
from .config import Budgets
from .policies.base import Policy
from .tools import ToolBox, call_validity, tool_specs

# Why an episode ended.
SUBMITTED, MAX_TURNS, CONTEXT, WALL_TIME = "submitted", "max_turns", "context_budget", "wall_time"
POLICY_ERROR, POLICY_DONE, SINGLE_TURN, NO_CODE = "policy_error", "policy_done", "single_turn", "no_code"
NO_TOOL_CALL = (
    "No tool call found in your reply. Call one of the tools (write_file, compile, verify, benchmark, ...) "
    "or submit when you are done."
)


@dataclass
class EpisodeResult:
    """One episode. ``turns``: one :class:`research.rollout.Turn` per assistant turn (its tool calls, their
    validity and verdicts); ``trajectory``: the token policy's typed trajectory (None for text policies),
    whose turns are these same objects with their token spans."""

    task_id: str
    level: str
    end_reason: str
    verdict: dict[str, Any]
    messages: list[dict[str, Any]]
    turns: list[Turn]
    usage: dict[str, Any]
    timings: dict[str, float]
    trajectory: Trajectory | None = None
    errors: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)

    def result_record(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "task": self.task_id,
            "level": self.level,
            "problem": v.get("problem"),
            "status": v.get("status"),
            "reward": v.get("reward"),
            "speedups": v.get("speedups") or {},
            "comparable": bool((v.get("timings") or {}).get("comparable")),
            "error": v.get("error"),
            "end_reason": self.end_reason,
            "turns": len(self.turns),
            "wall_s": round(self.timings.get("total_s", 0.0), 3),
        }

    def trajectory_record(self) -> dict[str, Any]:
        """The JSONL line of trajectories.jsonl: ``research.rollout.Trajectory.to_dict()`` (token policies;
        text policies: the same keys without tokens) with the conversation (``messages``, the offered
        ``tools``), usage, timings and errors beside it (``Trajectory.from_dict`` puts them in ``info``)."""
        traj = self.trajectory or Trajectory(task_id=self.task_id, prompt_ids=[], turns=self.turns)
        rec = traj.to_dict()
        rec.update(rec.pop("info"))
        rec.update(
            task=self.task_id,
            task_id=self.task_id,
            end_reason=self.end_reason,
            reward=self.verdict.get("reward"),
            verdict=self.verdict,
            tools=self.tools,
            **self.context(),
        )
        return rec

    def context(self) -> dict[str, Any]:
        """What an episode's trajectory carries beside its tokens (in trajectories.jsonl and in an RL
        trajectory's ``info``): its level, conversation, usage, timings and errors."""
        return {
            "level": self.level,
            "messages": self.messages,
            "usage": self.usage,
            "timings": self.timings,
            "errors": self.errors,
        }


def run_episode(
    task_id: str,
    reference: str,
    policy: Policy,
    ws: WorkspaceSession,
    budgets: Budgets,
    judge: JudgeConfig,
    *,
    skills=None,
    level: str = "all",
    single_turn: bool = False,
    skill_results: int = 3,
) -> EpisodeResult:
    t0 = time.perf_counter()
    tools = [] if single_turn else tool_specs(skills is not None)
    messages = prompts.messages(task_id, reference, skills is not None, single_turn)
    box = ToolBox(ws, judge, skills, max_bytes=budgets.max_observation_bytes, k=skill_results)
    offered = {t["function"]["name"] for t in tools}
    episode = policy.start(task_id, messages, tools)
    turns: list[Turn] = []
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "retries": 0}
    timing = {"policy_s": 0.0, "tools_s": 0.0, "judge_s": 0.0}
    errors: list[str] = []
    end = None
    try:
        while end is None:
            if len(turns) >= (1 if single_turn else budgets.max_turns):
                end = MAX_TURNS
                break
            if time.perf_counter() - t0 >= budgets.max_wall_s:
                end = WALL_TIME
                break
            if episode.context_tokens(messages) >= budgets.max_context_tokens:
                end = CONTEXT
                break
            action = episode.act(messages)
            timing["policy_s"] += action.latency_s
            for k in usage:
                usage[k] += int(action.usage.get(k, 0))
            if action.error:
                errors.append(action.error)
                end = POLICY_DONE if action.finish_reason == "script_end" else POLICY_ERROR
                break
            messages.append(action.message())
            turn = _turn(episode, action.finish_reason)
            turns.append(turn)
            if single_turn:
                end = _write_single_turn(ws, action.text)
                turn.invalid = end == NO_CODE
                break
            new_messages, results, submitted = [], [], False
            for call in action.tool_calls:
                res = box.run(call)
                timing["tools_s"] += res.elapsed_s
                valid, known, why = call_validity(call, offered)
                verdict = res.verdict
                turn.calls.append(
                    CallRecord(
                        name=call.name,
                        ok=res.ok,
                        valid=valid,
                        known=known,
                        error=why,
                        verdict=verdict,
                        elapsed_s=round(res.elapsed_s, 3),
                        truncated=res.truncated,
                    )
                )
                if verdict is not None:
                    turn.verdict = verdict
                new_messages.append(res.message())
                results.append(res)
                submitted = submitted or res.submitted
            # CUDA Agent's RFT drops episodes with invalid or hallucinated tool calls; a turn without any
            # call is not an action either.
            # (a token policy may have marked the turn already: the toy policy's plan that does not parse)
            turn.invalid = turn.invalid or not turn.calls or not all(c.valid for c in turn.calls)
            turn.hallucinated = turn.hallucinated or any(not c.known for c in turn.calls)
            if not action.tool_calls:
                new_messages.append({"role": "user", "content": NO_TOOL_CALL})
            messages.extend(new_messages)
            if submitted:
                end = SUBMITTED
                break
            episode.observe(new_messages, results if action.tool_calls else None)
            if episode.context_tokens(messages) > budgets.max_context_tokens:
                end = CONTEXT
    finally:
        builder = episode.tokens()
        episode.close()
    t1 = time.perf_counter()
    verdict = final_verdict(ws, judge, errors)
    timing["judge_s"] = time.perf_counter() - t1
    timing["total_s"] = time.perf_counter() - t0
    traj = builder.build(verdict, end) if isinstance(builder, TrajectoryBuilder) else None
    names = sorted(offered)
    return EpisodeResult(task_id, level, end, verdict, messages, turns, usage, timing, traj, errors, names)


def _turn(episode, finish: str) -> Turn:
    """The turn just acted: the token policy's own (with its token span), else a new one."""
    builder = episode.tokens()
    if isinstance(builder, TrajectoryBuilder) and builder.turns:
        return builder.turns[-1]
    return Turn(start=0, end=0, finish=finish)


def final_verdict(ws: WorkspaceSession, judge: JudgeConfig, errors: list[str]) -> dict[str, Any]:
    """The reward: a fresh snapshot of the workspace judged by the full harness. Every verdict has the
    sandbox's result schema: a workspace without model_new.py is ``no_solution`` with the judge's reward's
    failure value (-1 for CUDA Agent's tiers: anything that does not run); a sandbox that fails is
    ``infra_error``, no reward (docs/sandbox.md "Verdicts made outside the judge")."""
    if not any(f["path"] == "model_new.py" for f in ws.list_files()):
        error = "the workspace has no model_new.py"
        return Result.outside(NO_SOLUTION, error, problem=ws.problem, reward_fn=judge.reward).to_dict()
    try:
        return ws.evaluate(judge=judge)
    except Exception as exc:  # the sandbox itself failed: no reward, the run goes on
        errors.append(f"final evaluation failed: {type(exc).__name__}: {exc}")
        return Result.outside(INFRA_ERROR, errors[-1], problem=ws.problem, reward_fn=judge.reward).to_dict()


def _write_single_turn(ws: WorkspaceSession, text: str) -> str:
    code = prompts.extract_code(text)
    if code is None:
        return NO_CODE
    ws.write_file("model_new.py", code)
    return SINGLE_TURN
