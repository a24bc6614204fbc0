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
