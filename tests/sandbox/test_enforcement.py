"""The reward-hack defences as the sandbox reports them (CPU mode): policies and precision, adversarial
families in the verdict, the examples' verdicts, and the reply channel between requests. The attacks
themselves are the red-team corpus (tests/redteam)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from types import SimpleNamespace

from kernels_env.judge.build.compile_stage import _parse_report
from kernels_env.rules.config import JudgeConfig
from kernels_env.rules.result import validate

from .conftest import FAST, RELU_PROBLEM, RELU_TRITON, relu_with, src

ROOT = Path(__file__).resolve().parents[2]
REF = src(RELU_PROBLEM)
NONNEG_RELU = REF.replace("torch.rand(N) * 2 - 1", "torch.rand(N)")  # ReLU on [0, 1): `return x` passes


def test_tf32_only_where_the_policy_allows_it(client):
    """cuda_agent runs the candidate (and its baselines) with TF32 on, fp32 floor 1e-2; strict never does."""
    sol = relu_with('return relu(x, shift=0.0 if torch.get_float32_matmul_precision() == "high" else 0.5)')
    allowed = client.evaluate(
        REF, sol, judge=JudgeConfig(policy="cuda_agent", time_candidate=False, families=[])
    )
    assert allowed["status"] == "correct", allowed["error"]
    assert allowed["judge"]["allow_tf32"] is True and allowed["judge"]["tolerances"]["float32"] == [
        1e-2,
        1e-2,
    ]
    strict = client.evaluate(REF, sol, judge=FAST)
    assert strict["status"] == "incorrect" and strict["judge"]["allow_tf32"] is False


def test_families_are_reported_separately_and_fatal_per_protocol(client):
    """A copy kernel is ReLU on [0, 1) inputs: the trials pass, the fatal `negative` family does not."""
    body = "out = torch.empty_like(x)\n_copy[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)"
    ident = relu_with(
        body + "\nreturn out",
        header="""
import triton
import triton.language as tl

@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
""",
    )
    judge = JudgeConfig(time_candidate=False, num_trials=2, families=["negative", "zeros", "nan_inf"])
    res = client.evaluate(NONNEG_RELU, ident, judge=judge)
    validate(res)
    fams = res["correctness"]["families"]
    assert res["status"] == "incorrect" and res["correctness"]["failed_family"] == "negative", res["error"]
    assert fams["negative"]["status"] == "fail" and fams["negative"]["fatal"] is True
    assert fams["negative"]["first_index"] is not None and fams["zeros"]["status"] == "pass"
    assert fams["nan_inf"]["status"] == "fail" and fams["nan_inf"]["fatal"] is False  # -inf stays -inf
    reported = client.evaluate(NONNEG_RELU, ident, judge=dataclasses.replace(judge, fatal_families=[]))
    assert (
        reported["status"] == "correct"
        and reported["correctness"]["families"]["negative"]["status"] == "fail"
    )
    assert any("input family 'negative'" in m["text"] for m in reported["messages"] if m["kind"] == "note")


def test_the_examples_keep_their_verdicts(client):
    """Plain PyTorch is rejected under strict (docs/sandbox.md); the wrong-shape example stays incorrect."""
    ex = ROOT / "examples"
    res = client.evaluate(ex / "problems/4_layernorm.py", ex / "solutions/4_layernorm__torch.py", judge=FAST)
    assert res["status"] == "rejected" and res["check"] == "forbidden_op" and res["reward"] == -1.0
    assert "aten.mean" in res["error"] and "4_layernorm__torch.py" in res["evidence"]["frame"]
    res = client.evaluate(ex / "problems/6_conv2d.py", ex / "solutions/6_conv2d__wrong_shape.py", judge=FAST)
    assert (
        res["status"] == "incorrect" and "shape [8, 16, 62, 62] != expected [8, 16, 64, 64]" in res["error"]
    )
    assert res["judge"]["guard_enforced"] is True


def test_every_verdict_says_the_guard_was_enforced(client):
    for sol in ("def (:\n", src(RELU_TRITON), relu_with("raise ValueError('x')")):
        res = client.evaluate(REF, sol, judge=FAST)
        assert res["judge"]["guard_enforced"] is True, res["status"]


# At import in the run stage: a helper process, detached from the worker (double fork), that keeps the
# worker's reply descriptor and writes a forged line after this request has ended.
LATE_WRITER = r"""
import os, stat, subprocess, sys

FORGED = b'{"v": 1, "kind": "reply", "id": "x", "payload": {}}\n'


def _pipe(fd):
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


if os.environ.get("KERNELS_ENV_BUILD_ONLY") == "0":
    fds = [int(n) for n in os.listdir("/proc/self/fd") if _pipe(int(n))]
    script = "\n".join([
        "import os, sys, time",
        "if os.fork(): sys.exit(0)",
        "time.sleep(2.0)",
        f"for fd in {fds!r}:",
        f"    try: os.write(fd, {FORGED!r})",
        "    except OSError: pass",
    ])
    subprocess.run([sys.executable, "-c", script], pass_fds=fds, check=True)
"""


def test_a_late_forged_line_never_reaches_the_next_request(client, monkeypatch):
    """A worker that wrote anything while idle is replaced before it gets the next request."""
    from kernels_env.runtime import supervisor

    seen = []
    check = supervisor.Worker.stray_output

    def spy(worker):
        stray = check(worker)
        seen.append((worker.role, stray, bytes(worker._buffer[:200])))
        return stray

    monkeypatch.setattr(supervisor.Worker, "stray_output", spy)
    first = client.evaluate(REF, relu_with("return relu(x)", header=LATE_WRITER), judge=FAST)
    assert first["status"] == "correct", first["error"]  # it computed the right answer; the line comes later
    time.sleep(3.0)  # the detached writer has written into the idle worker's reply pipe by now
    after = client.evaluate(REF, src(RELU_TRITON), judge=FAST)
    assert after["status"] == "correct", (after["status"], after["check"], after["error"])
    assert any(role == "run" and stray and b'"kind": "reply"' in data for role, stray, data in seen), seen


def test_the_compile_childs_report_is_checked():
    req = SimpleNamespace(solution=SimpleNamespace(text="import torch\n", files=None))
    line = lambda v: json.dumps(v).encode() + b"\n"  # noqa: E731
    ok = {"status": "ok", "needs_cuda": True, "backends": ["torch"]}
    assert _parse_report(b"", req) is None  # died before writing anything
    assert _parse_report(line({"problem_error": "broken"}), req) == {"problem_error": "broken"}
    assert _parse_report(line({"reference": "ok"}), req) is None  # died while importing the solution
    report = _parse_report(line({"reference": "ok"}) + line(ok), req)
    assert report["status"] == "ok" and report["needs_cuda"] is False  # recomputed from the sources
    forged = [
        line({"reference": "ok"})
        + line({"problem_error": "x"}),  # a problem error after the reference loaded
        line({"reference": "ok"}) + line(ok) + line(ok),  # more than one report
        line({"status": "ok"}) + line(ok),  # no reference line first
        b"not json\n",
    ]
    for data in forged:
        assert _parse_report(data, req)["check"] == "protocol_forgery", data
