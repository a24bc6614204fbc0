"""Episodes with the scripted policy in the CPU sandbox: a correct Triton kernel written, verified and
submitted is judged `correct`; every budget ends an episode with its reason; a policy that never submits
still gets its workspace judged; tool errors are observations; observations are truncated with a note."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kernels_env.client import CORRECT, INFRA_ERROR, NO_SOLUTION, JudgeConfig, Result, SandboxError
from kernels_env.rules.result import validate
from kernels_env.session import WorkspaceSession
from research import rl
from research.agent import Budgets, ScriptedPolicy, ToolBox, ToolCall, prompts, run_episode
from research.agent.episode import NO_TOOL_CALL, final_verdict
from research.agent.policies.scripted import ScriptedEpisode
from research.agent.tools import render_verdict, truncate

from .conftest import FAST, RELU_TRITON, write_call


def _run(problem, sandbox, steps, budgets=None, **kw):
    with WorkspaceSession(problem, client=sandbox) as ws:
        return run_episode(
            "level1/1_relu", problem.read_text(), ScriptedPolicy(steps), ws, budgets or Budgets(), FAST, **kw
        )


def test_scripted_triton_episode_verifies_and_submits_correct(relu_problem, sandbox):
    steps = [{"name": "list_files"}, write_call(), {"name": "verify"}, {"name": "submit"}]
    res = _run(relu_problem, sandbox, steps)
    assert res.end_reason == "submitted"
    assert res.verdict["status"] == "correct" and res.verdict["reward"] >= 1
    verify = [m for m in res.messages if m.get("role") == "tool" and m["name"] == "verify"][0]
    assert verify["content"].startswith("status: correct")
    rec = res.result_record()
    assert rec["status"] == "correct" and rec["turns"] == 4 and rec["level"] == "all"
    assert [c.name for t in res.turns for c in t.calls] == [
        "list_files",
        "write_file",
        "verify",
        "submit",
    ]


def test_never_submitting_policy_gets_its_workspace_judged_at_max_turns(relu_problem, sandbox):
    steps = [write_call()] + [{"name": "list_files"}] * 10
    res = _run(relu_problem, sandbox, steps, Budgets(max_turns=3))
    assert res.end_reason == "max_turns" and len(res.turns) == 3
    assert res.verdict["status"] == "correct"  # judged fresh, though the policy never verified or submitted


def test_a_script_that_runs_out_is_judged_too(relu_problem, sandbox):
    res = _run(relu_problem, sandbox, [write_call(RELU_TRITON.replace("0.0, x", "1.0, x"))])
    assert res.end_reason == "policy_done"
    assert res.verdict["status"] == "incorrect" and res.verdict["reward"] == -1


def test_wall_time_and_context_budgets(relu_problem, sandbox):
    slow = [{"name": "list_files"}] * 5
    res = _run(relu_problem, sandbox, slow, Budgets(max_wall_s=1e-9))
    assert res.end_reason == "wall_time" and not res.turns
    assert res.verdict["status"] == "no_solution" and res.verdict["reward"] == -1
    big = [{"name": "read_file", "arguments": {"path": "model.py"}}] * 5
    # the scripted policy's context estimate: 4 bytes of the JSON messages per token
    start = len(json.dumps(prompts.messages("level1/1_relu", relu_problem.read_text(), False))) // 4
    res = _run(relu_problem, sandbox, big, Budgets(max_context_tokens=start + 100))
    assert res.end_reason == "context_budget" and 1 <= len(res.turns) < 5


def test_tool_errors_are_observations(relu_problem, sandbox):
    steps = [
        [
            {"name": "no_such_tool"},
            {"name": "read_file", "arguments": "{not json"},
            {"name": "write_file", "arguments": {"path": "model.py", "content": "x"}},
            {"name": "read_file", "arguments": {"path": "model.py", "bogus": 1}},
            {"name": "edit_file", "arguments": {"path": "model.py", "old": "zzz", "new": "y"}},
            {"name": "skill", "arguments": {"query": "softmax"}},
        ],
        {"name": "submit"},
    ]
    res = _run(relu_problem, sandbox, steps)
    texts = [m["content"] for m in res.messages if m.get("role") == "tool"]
    assert texts[0].startswith("error: unknown tool 'no_such_tool'")
    assert "not valid JSON" in texts[1]
    assert "read-only" in texts[2]
    assert "takes no argument(s) ['bogus']" in texts[3]
    assert "occurs 0 times" in texts[4]
    assert "skills are switched off" in texts[5]
    assert res.end_reason == "submitted" and res.verdict["status"] == "no_solution"


def test_observations_are_truncated_with_a_note(relu_problem, sandbox):
    text, cut = truncate("a" * 5000 + "END", 1000)
    assert cut and len(text.encode()) <= 1000 and text.endswith("END") and "observation truncated" in text
    assert truncate("short", 1000) == ("short", False)
    with WorkspaceSession(relu_problem, client=sandbox) as ws:
        ws.write_file("model_new.py", "#" * 20000)
        box = ToolBox(ws, FAST, max_bytes=600)
        res = box.run(ToolCall("c", "read_file", '{"path": "model_new.py"}'))
        assert res.ok and res.truncated and len(res.text.encode()) <= 600 and "truncated" in res.text


def test_budgets_reject_nonsense():
    with pytest.raises(ValueError, match="max_turns must be > 0"):
        Budgets(max_turns=0)
    assert dataclasses.asdict(Budgets())["max_turns"] == 200


class FakeWorkspace:
    """The WorkspaceSession surface the loop uses, in-process: ``evaluate`` answers with a Result dict as the
    sandbox does (correct; timed: speedups), or raises ``fail``."""

    problem = "1_relu"

    def __init__(self, solution: bool = True, fail: Exception | None = None):
        self.files = {"model.py": "class Model: ...\n", **({"model_new.py": "x = 1\n"} if solution else {})}
        self.fail, self.judges, self.verdicts = fail, [], []

    def list_files(self):
        return [{"path": p, "bytes": len(t), "writable": p != "model.py"} for p, t in self.files.items()]

    def write_file(self, path, content):
        self.files[path] = content
        return {"path": path, "bytes": len(content)}

    def evaluate(self, judge=None):
        self.judges.append(judge)
        if self.fail is not None:
            raise self.fail
        timed = judge.time_candidate
        speedups = {"eager": 1.3, "compile": None} if timed else {}
        stage = "timing" if timed else "correctness"
        verdict = Result(
            CORRECT, stage, self.problem, "ws", reward=1.0, reward_fn=judge.reward, speedups=speedups
        )
        self.verdicts.append(verdict.to_dict())
        return self.verdicts[-1]


def test_verify_and_benchmark_results_carry_the_sandbox_verdict():
    ws = FakeWorkspace()
    box = ToolBox(ws, FAST)
    verify = box.run(ToolCall("a", "verify"))
    assert verify.verdict == ws.verdicts[-1] and ws.judges[-1].time_candidate is False
    assert verify.ok and verify.text == render_verdict(ws.verdicts[-1], timed=False)
    bench = box.run(ToolCall("b", "benchmark"))
    assert bench.verdict == ws.verdicts[-1] and ws.judges[-1].time_candidate is True
    assert bench.verdict["speedups"] == {"eager": 1.3, "compile": None} and "eager 1.300x" in bench.text
    assert box.run(ToolCall("c", "list_files")).verdict is None  # only judged calls carry one
    broken = FakeWorkspace(fail=SandboxError("workers do not start"))
    down = ToolBox(broken, FAST).run(ToolCall("d", "verify"))
    assert down.verdict is None and not down.ok and down.text.startswith("error: verify failed: SandboxError")


# each reward's failure value (docs/sandbox.md "Reward")
@pytest.mark.parametrize(("reward", "failure"), [("cuda_agent", -1.0), ("binary", 0.0), ("log_speedup", -2)])
def test_final_verdicts_made_outside_the_judge_are_results(reward, failure):
    errors: list[str] = []
    judge = JudgeConfig(reward=reward)
    none = final_verdict(FakeWorkspace(solution=False), judge, errors)
    validate(none)
    assert none["status"] == NO_SOLUTION and none["problem"] == "1_relu" and not errors
    assert "no model_new.py" in none["error"]
    assert none["reward"] == failure and none["reward_fn"] == reward
    down = final_verdict(FakeWorkspace(fail=SandboxError("the client was closed")), judge, errors)
    validate(down)
    assert down["status"] == INFRA_ERROR and down["reward"] is None and "SandboxError" in errors[-1]
    assert down["error"] == errors[-1]
    with pytest.raises(rl.Dropped, match=f"^{INFRA_ERROR}$"):  # never a reward in training
        rl.verdict_reward(down, rl.RewardConfig(reward_fn=reward))


class _Recording(ScriptedEpisode):
    def __init__(self, steps, seen):
        super().__init__(steps)
        self.seen = seen

    def observe(self, new_messages, results=None):
        self.seen.append((new_messages, results))


class _RecordingPolicy(ScriptedPolicy):
    def __init__(self, steps):
        super().__init__(steps)
        self.seen: list = []

    def start(self, task_id, messages, tools):
        return _Recording(list(self.script), self.seen)


def test_run_episode_hands_each_turns_tool_results_to_observe():
    policy = _RecordingPolicy([[write_call(), {"name": "verify"}], [], {"name": "submit"}])
    ws = FakeWorkspace(solution=False)
    res = run_episode("level1/1_relu", "ref", policy, ws, Budgets(), FAST)
    assert res.end_reason == "submitted" and res.verdict == ws.verdicts[-1]
    (calls, results), (note, no_results) = policy.seen  # the submitting turn is not observed
    assert [r.name for r in results] == ["write_file", "verify"] and results[0].verdict is None
    assert results[1].verdict == ws.verdicts[0] and results[1].verdict["status"] == CORRECT
    assert [m["content"] for m in calls] == [r.text for r in results]
    assert no_results is None and note == [{"role": "user", "content": NO_TOOL_CALL}]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"name": "verify", "arguments": "{not json"}, "invalid_action"),  # malformed arguments
        ({"name": "write_file", "arguments": {"path": "model_new.py"}}, "invalid_action"),  # no content
        ({"name": "compile_and_win", "arguments": {}}, "hallucinated_action"),  # a tool nobody offered
        (None, None),  # the clean episode is kept
    ],
)
def test_rft_drops_an_episode_with_a_malformed_or_hallucinated_tool_call(bad, reason):
    from research.rl.pipeline import RFTFilterConfig, rejection_reason
    from research.rollout import Trajectory

    steps = [write_call()] + ([bad] if bad else []) + [{"name": "submit", "arguments": {}}]
    ws = FakeWorkspace()
    res = run_episode("t", "ref", ScriptedPolicy(steps), ws, Budgets(max_turns=5), FAST)
    assert res.verdict["status"] == CORRECT  # the final verdict alone would keep it
    record = json.loads(json.dumps(res.trajectory_record()))  # through trajectories.jsonl
    traj = Trajectory.from_dict(record)
    calls = [c for t in traj.turns for c in t.calls]
    assert [c.name for c in calls] == [s["name"] for s in steps]
    if bad is not None:
        invalid = reason == "invalid_action"  # else hallucinated: valid JSON naming no offered tool
        assert calls[1].valid != invalid and calls[1].known == invalid and calls[1].error
        assert traj.turns[1].invalid == invalid and traj.turns[1].hallucinated != invalid
    assert rejection_reason(traj, RFTFilterConfig(), rl.RewardConfig()) == reason
