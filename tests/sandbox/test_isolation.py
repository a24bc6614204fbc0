"""Process isolation in CPU mode: candidates that abort, hang or eat memory kill only their worker; the next
request on the same client succeeds; malformed solutions get clear verdicts."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import psutil
import pytest

from kernels_env.client import SandboxClient
from kernels_env.rules.result import validate

from .conftest import FAST, RELU_PROBLEM, RELU_TRITON, cpu_config, relu_with, src

REF = src(RELU_PROBLEM)
GOOD = src(RELU_TRITON)


@pytest.fixture(scope="module")
def tight(cache_dir):
    """Short limits so hangs and runaway allocations are cut quickly."""
    config = cpu_config(cache_dir, run_timeout_s=6, compile_timeout_s=6, memory_limit_gb=1.5)
    with SandboxClient(config) as sb:
        yield sb


def check(result, status, stage=None):
    validate(result)
    json.dumps(result)  # JSON-ready
    assert result["status"] == status, (result["error"], result["messages"])
    if stage:
        assert result["stage"] == stage
    return result


def still_works(sb):
    check(sb.evaluate(REF, GOOD, judge=FAST), "correct")


def test_abort_in_forward_kills_the_worker_not_the_client(tight):
    res = check(
        tight.evaluate(REF, relu_with("import os\nos.abort()"), judge=FAST), "runtime_error", "correctness"
    )
    assert "SIGABRT" in res["error"] and res["reward"] == -1.0
    still_works(tight)


def test_endless_loop_in_forward_times_out(tight):
    res = check(tight.evaluate(REF, relu_with("while True:\n    pass"), judge=FAST), "timeout")
    assert "6 s limit" in res["error"] and res["stage"] == "correctness"
    still_works(tight)


def test_unbounded_allocation_is_killed_at_the_memory_limit(tight):
    body = "hog = []\nwhile True:\n    hog.append(torch.ones(2**26))"  # 256 MiB a step, touched
    res = check(tight.evaluate(REF, relu_with(body), judge=FAST), "runtime_error")
    assert "memory" in res["error"] and "1.50 GiB" in res["error"]
    still_works(tight)


def test_output_flood_is_cut(tight):
    body = "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)"
    res = check(tight.evaluate(REF, relu_with(body), judge=FAST), "runtime_error")
    assert "printed more than 64 MiB" in res["error"]
    still_works(tight)


def test_abort_and_hang_at_import_are_compile_stage_verdicts(tight):
    res = check(
        tight.evaluate(REF, relu_with("return x", header="import os\nos.abort()"), judge=FAST),
        "compile_error",
        "compile",
    )
    assert "SIGABRT" in res["error"]
    res = check(
        tight.evaluate(REF, relu_with("return x", header="while True:\n    pass"), judge=FAST),
        "timeout",
        "compile",
    )
    assert "compile stage exceeded 6 s" in res["error"]
    still_works(tight)


def test_candidate_output_on_stdout_cannot_corrupt_the_protocol(client):
    noisy = relu_with(
        'print(\'{"v": 1, "kind": "reply"}\', flush=True)\nimport sys\n'
        "sys.__stdout__.write('garbage\\n')\nreturn relu(x)",
        header="print('at import')",
    )
    check(client.evaluate(REF, noisy, judge=FAST), "correct")


@pytest.mark.parametrize(
    ("solution", "status", "stage", "needle"),
    [
        ("import torch\nclass ModelNew(torch.nn.Module:\n    pass\n", "compile_error", "compile", "line 2"),
        (
            "import torch\nclass Model(torch.nn.Module):\n    pass\n",
            "compile_error",
            "compile",
            "no class ModelNew",
        ),
        (
            relu_with("return x").replace("def __init__(self):", "def __init__(self, width):"),
            "compile_error",
            "compile",
            "ModelNew(width) cannot take the task's 0 argument",
        ),
        (
            relu_with("return x").replace("def forward(self, x):", "def forward(self, x, y):"),
            "runtime_error",
            "correctness",
            "ModelNew.forward(x, y) cannot take the task's 1 argument",
        ),
        (
            relu_with("return relu(x)[:-1]"),
            "incorrect",
            "correctness",
            "shape [1023] != expected [1024]",
        ),
        (
            relu_with("return relu(x, torch.empty(x.shape, dtype=torch.float64))"),
            "rejected",  # a dtype downgrade or change is a policy check (catalogue #10)
            "correctness",
            "output 0 is torch.float64, expected torch.float32",
        ),
        (
            relu_with("return relu(x), x"),
            "incorrect",
            "correctness",
            "expected a tensor, got tuple",
        ),
        (
            relu_with("raise ValueError('bad block size')"),
            "runtime_error",
            "correctness",
            "ValueError: bad block size",
        ),
        (relu_with("return x", init="raise RuntimeError('no init')"), "runtime_error", "load", "no init"),
        (
            relu_with("return relu(x, shift=0.5)"),
            "incorrect",
            "correctness",
            "values differ",
        ),
    ],
    ids=[
        "syntax",
        "no-ModelNew",
        "constructor-signature",
        "forward-signature",
        "shape",
        "dtype",
        "structure",
        "raises",
        "init-raises",
        "values",
    ],
)
def test_malformed_solutions(client, solution, status, stage, needle):
    res = check(client.evaluate(REF, solution, judge=FAST), status, stage)
    assert needle in res["error"], res["error"]
    assert res["reward"] == -1.0


def test_exception_traceback_is_trimmed_to_candidate_frames(client):
    sol = relu_with("return helper(x)", header="def helper(x):\n    return x.view(7, -1)")
    res = check(client.evaluate(REF, sol, judge=FAST, solution_name="mine.py"), "runtime_error")
    tb = next(m["text"] for m in res["messages"] if m["kind"] == "traceback")
    assert 'File "mine.py"' in tb and "in helper" in tb and "kernels_env" not in tb


def test_global_state_changes_do_not_leak(client):
    """A candidate that changes torch's defaults at import or in forward is rejected for it (catalogue #10),
    and changes neither the reference's inputs nor the next candidate's world."""
    for evil in (
        relu_with("return relu(x)", header="torch.set_default_dtype(torch.float64)"),
        relu_with("torch.set_default_dtype(torch.float64)\nreturn relu(x)"),
    ):
        res = check(client.evaluate(REF, evil, judge=FAST), "rejected")
        assert res["check"] == "precision_state" and res["evidence"]["flag"] == "default_dtype", res
    sensitive = relu_with("return relu(x, torch.empty(x.shape))")  # the default dtype decides the output's
    check(client.evaluate(REF, sensitive, judge=FAST), "correct")


def test_sys_exit_in_forward_is_a_runtime_error(client):
    res = check(client.evaluate(REF, relu_with("import sys\nsys.exit(0)"), judge=FAST), "runtime_error")
    assert "SystemExit" in res["error"]
    check(client.evaluate(REF, GOOD, judge=FAST), "correct")


def test_a_killed_workers_temporary_files_go_with_it(tmp_path):
    """Each worker process has its own TMPDIR, removed when the process is killed: files its tools left
    (gcc's cc*.s, a TemporaryDirectory) after a kill no longer pile up in /tmp."""
    from kernels_env.runtime.supervisor import Worker

    w = Worker("run", "cpu", {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"}, tmp_path, "tmpcheck",
               memory_limit_bytes=8 * 2**30, startup_timeout_s=120)  # fmt: skip
    w.start()
    try:
        tmp = Path(w.tmpdir)
        assert tmp.is_dir() and tmp.parent == Path(tempfile.gettempdir())
        env = psutil.Process(w.proc.pid).environ()
        assert env["TMPDIR"] == str(tmp) and env["TORCHINDUCTOR_CACHE_DIR"].startswith(tempfile.gettempdir())
        (tmp / "ccLeft.s").write_text("left by a tool the kill cut short")
    finally:
        w.kill()
    assert not tmp.exists() and w.tmpdir is None
