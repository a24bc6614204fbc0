"""The openai policy against a real OpenAI-compatible HTTP server started here on 127.0.0.1, through the
official ``openai`` client: tool calls (one malformed, one unknown) become observations, results go back
as tool messages with their call ids, a 429 is retried with backoff, usage is summed, and the episode
submits a correct Triton kernel."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kernels_env.session import WorkspaceSession
from research.agent import Budgets, OpenAIPolicyConfig, run_episode
from research.agent.policies.openai_policy import OpenAIPolicy

from .conftest import FAST, RELU_TRITON


def _call(cid, name, arguments):
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


REPLIES = [
    [
        _call("c1", "write_file", {"path": "model_new.py", "content": RELU_TRITON}),
        _call("c2", "read_file", '{"path": "model.py"'),  # malformed JSON
        _call("c3", "launch_missiles", {}),  # unknown tool
    ],
    [_call("c4", "verify", {})],
    [_call("c5", "submit", {})],
]


class _Server:
    def __init__(self, fail_first_with: int | None = 429, always_fail: bool = False):
        self.requests: list[dict] = []
        self.fail, self.always_fail, self.failures = fail_first_with, always_fail, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if outer.fail is not None:
                    status = outer.fail
                    outer.fail = outer.fail if outer.always_fail else None
                    outer.failures += 1
                    return self._send(status, {"error": {"message": "slow down", "type": "rate_limit"}})
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                turn = len(outer.requests) - 1
                calls = REPLIES[min(turn, len(REPLIES) - 1)]
                message = {"role": "assistant", "content": f"turn {turn}", "tool_calls": calls}
                self._send(
                    200,
                    {
                        "id": f"cmpl-{turn}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                        "usage": {
                            "prompt_tokens": 100 + turn,
                            "completion_tokens": 10,
                            "total_tokens": 110 + turn,
                        },
                    },
                )

            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture()
def server():
    s = _Server()
    yield s
    s.close()


def test_episode_through_a_real_openai_compatible_server(server, relu_problem, sandbox, monkeypatch):
    monkeypatch.setenv("TEST_AGENT_KEY", "sk-test")
    policy = OpenAIPolicy(
        OpenAIPolicyConfig(
            model="tiny-coder",
            base_url=server.url,
            api_key_env="TEST_AGENT_KEY",
            temperature=0.2,
            max_tokens=64,
            max_retries=2,
            backoff_s=0.01,
        )
    )
    with WorkspaceSession(relu_problem, client=sandbox) as ws:
        res = run_episode("1_relu", relu_problem.read_text(), policy, ws, Budgets(max_turns=10), FAST)
    assert res.end_reason == "submitted" and res.verdict["status"] == "correct"
    first, second = server.requests[0], server.requests[1]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert first["model"] == "tiny-coder" and first["max_tokens"] == 64 and first["temperature"] == 0.2
    names = {t["function"]["name"] for t in first["tools"]}
    assert names >= {"write_file", "verify", "submit"} and "skill" not in names  # skills off here
    tool_msgs = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert tool_msgs["c1"].startswith("wrote model_new.py")
    assert "not valid JSON" in tool_msgs["c2"]
    assert tool_msgs["c3"].startswith("error: unknown tool 'launch_missiles'")
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][0]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2", "c3"]
    assert res.usage["prompt_tokens"] == 100 + 101 + 102 and res.usage["completion_tokens"] == 30
    assert res.usage["retries"] == 1  # the 429 before the first reply


def test_missing_key_and_failing_endpoint(monkeypatch, relu_problem, sandbox):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR' is not set"):
        OpenAIPolicy(
            OpenAIPolicyConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="NO_SUCH_KEY_VAR")
        )
    s = _Server(fail_first_with=503, always_fail=True)
    monkeypatch.setenv("K", "x")
    try:
        cfg = OpenAIPolicyConfig(model="m", base_url=s.url, api_key_env="K", max_retries=2, backoff_s=0.01)
        policy = OpenAIPolicy(cfg)
        action = policy.start("t", [], []).act([{"role": "user", "content": "hi"}])
        assert action.error and "InternalServerError" in action.error and action.finish_reason == "error"
        assert s.failures == 3  # the first try and two retries
    finally:
        s.close()
