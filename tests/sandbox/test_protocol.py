"""The JSON-lines wire protocol: every message round-trips; other versions and bad lines fail clearly."""

from __future__ import annotations

import json

import pytest

from kernels_env.rules import messages
from kernels_env.rules.messages import (
    PROTOCOL_VERSION,
    BaselineRequest,
    CompileRequest,
    EvaluateRequest,
    Hello,
    Progress,
    ProtocolError,
    Reply,
    Shutdown,
    Source,
)

REF = Source(name="1_relu.py", text="class Model: ...\n")
SOL = Source(
    name="ws", files={"model_new.py": "class ModelNew: ...\n", "kernels/k.cu": "__global__ void k(){}"}
)

MESSAGES = [
    Hello(role="run", pid=12, environment={"gpu": "H200", "torch": "2.11"}),
    CompileRequest(id="a1", reference=REF, solution=SOL, workdir="/tmp/x", timeout_s=30.0, env={"A": "1"}),
    EvaluateRequest(
        id="a2",
        reference=REF,
        solution=Source(name="s.py", text="x = 1\n"),
        workdir="/w",
        judge={"protocol": "kernelbench", "tolerances": {"float32": [1e-4, 1e-4]}},
    ),
    BaselineRequest(
        id="a3", reference=REF, modes=["eager", "compile"], judge={}, cache_dir="/c", workdir="/w"
    ),
    Progress(id="a2", stage="timing", detail="x"),
    Shutdown(),
    Reply(id="a2", payload={"status": "correct", "nested": [1, 2.5, None]}, fatal=True),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.kind)
def test_round_trip(message):
    line = messages.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1, "one message is one line"
    assert messages.decode(line) == message
    assert json.loads(line)["v"] == PROTOCOL_VERSION


def test_other_version_is_a_clear_error():
    data = json.loads(messages.encode(Shutdown()))
    data["v"] = PROTOCOL_VERSION + 1
    with pytest.raises(
        ProtocolError, match=rf"version {PROTOCOL_VERSION + 1} is not supported.*speaks version"
    ):
        messages.decode(json.dumps(data))
    del data["v"]
    with pytest.raises(ProtocolError, match="version None"):
        messages.decode(json.dumps(data))


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("not json", "not a JSON line"),
        ("[1, 2]", "JSON object"),
        ('{"v": 1, "kind": "teleport"}', "unknown message kind 'teleport'"),
        ('{"v": 1, "kind": "progress", "id": "x", "stage": "s", "bogus": 1}', "unknown fields"),
        ('{"v": 1, "kind": "progress"}', "malformed progress"),
    ],
)
def test_malformed_lines(line, match):
    with pytest.raises(ProtocolError, match=match):
        messages.decode(line)


def test_non_finite_floats_become_null():
    line = messages.encode(Reply(id="r", payload={"a": float("nan"), "b": [float("inf"), 1.0]}))
    assert messages.decode(line).payload == {"a": None, "b": [None, 1.0]}


def test_a_source_is_text_or_files():
    with pytest.raises(ProtocolError):
        Source(name="x")
    with pytest.raises(ProtocolError):
        Source(name="x", text="a", files={"b": "c"})


def test_result_round_trip_and_schema_version():
    from kernels_env.rules.result import Result, new_result

    data = new_result(status="incorrect", stage="correctness", problem="p", solution="s.py", error="x")
    data["messages"].append({"kind": "mismatch", "text": "t", "first_index": [0, 1]})
    parsed = Result.from_json(json.dumps(data))
    assert parsed.to_dict() == data and parsed.status == "incorrect"
    with pytest.raises(ValueError, match="schema version 99 is not supported"):
        Result.from_dict({**data, "schema_version": 99})
    with pytest.raises(ValueError, match="unknown keys"):
        Result.from_dict({**data, "extra": 1})


# The failure value of each registered reward (docs/sandbox.md "Reward"): what no_solution must get.
FAILURE_REWARD = {"cuda_agent": -1.0, "binary": 0.0, "speedup": 0.0, "log_speedup": -2.0}


def test_outside_statuses_in_the_one_vocabulary():
    from kernels_env import client
    from kernels_env.rules.result import JUDGE_STATUSES

    assert client.NO_SOLUTION == "no_solution" and client.INFRA_ERROR == "infra_error"
    assert client.NO_SOLUTION in client.FAILURES and client.NO_SOLUTION not in client.NO_VERDICT
    assert client.INFRA_ERROR in client.NO_VERDICT and client.INFRA_ERROR not in client.FAILURES
    assert set(client.STATUSES) == set(client.FAILURES) | {client.CORRECT} | set(client.NO_VERDICT)
    assert set(client.STATUSES) - set(JUDGE_STATUSES) == {client.NO_SOLUTION, client.INFRA_ERROR}


def test_every_reward_fails_no_solution_and_has_none_for_infra_error():
    from kernels_env.rules.result import INFRA_ERROR, NO_SOLUTION
    from kernels_env.rules.rewards import REWARDS, get_reward

    assert set(REWARDS) == set(FAILURE_REWARD)  # a new reward: add its failure value above
    fast = {"eager": 9.0, "compile": 9.0}  # speedups never make a failure pay
    for name in REWARDS:
        assert get_reward(name)(NO_SOLUTION, fast) == FAILURE_REWARD[name], name
        assert get_reward(name)(INFRA_ERROR, fast) is None, name


def test_outside_verdicts_are_full_results_that_round_trip():
    from kernels_env.client import INFRA_ERROR, NO_SOLUTION, REWARDS, Result
    from kernels_env.rules.result import validate

    for name in REWARDS:
        made = Result.outside(NO_SOLUTION, "no model_new.py", problem="1_relu", reward_fn=name)
        data = made.to_dict()
        validate(data)
        assert Result.from_json(json.dumps(data)) == made and Result.from_dict(data).to_dict() == data
        assert data["reward"] == FAILURE_REWARD[name] and data["reward_fn"] == name
        assert data["stage"] == "compile" and data["problem"] == "1_relu" and data["speedups"] == {}
    infra = Result.outside(INFRA_ERROR, "SandboxError: down", reward_fn="cuda_agent")
    assert Result.from_dict(infra.to_dict()) == infra and infra.reward is None and infra.error
    assert Result.outside(NO_SOLUTION, "x").reward is None  # no reward function named: no reward
    with pytest.raises(ValueError, match="only the judge gives 'correct'"):
        Result.outside("correct", "x")
    with pytest.raises(ValueError, match="unknown stage"):
        Result.outside(NO_SOLUTION, "x", stage="submit")
