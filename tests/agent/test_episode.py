"""Episodes with the scripted policy in the CPU sandbox: a correct Triton kernel written, verified and
submitted is judged `correct`; every budget ends an episode with its reason; a policy that never submits
still gets its workspace judged; tool errors are observations; observations are truncated with a note."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kernels_env.session import WorkspaceSession
from research.agent import Budgets, ScriptedPolicy, ToolBox, ToolCall, prompts, run_episode
from research.agent.tools import truncate

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
