"""Each filter rejects a planted bad task and keeps a good one."""

from __future__ import annotations

import textwrap

import pytest

from research.data.checks import apply_overrides, check_task
from research.data.decontam import EvalIndex, similarity
from research.data.gpu_filter import SandboxTimer, apply_window
from research.data.pool import WorkerPool
from research.data.records import TaskRecord


def task(
    forward: str, init: str = "pass", inputs: str = "[torch.randn(batch_size, dim)]", extra: str = ""
) -> str:
    return textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                {init}

            def forward(self, x, *rest):
                {forward}


        batch_size = 8
        dim = 64
        {extra}

        def get_inputs():
            return {inputs}


        def get_init_inputs():
            return [dim]
        """)


GOOD = task("return F.gelu(self.fc(x))", init="self.fc = nn.Linear(dim, 32)")


def run(source: str, **kw) -> dict:
    payload = {"source": source, "tolerance": 1e-2, "compile_backend": "none", "seed": 0, **kw}
    return check_task(payload)


def test_good_task_passes_every_check_including_compile():
    res = run(GOOD, expect_shape=[8, 32], compile_backend="aot_eager")
    assert res["ok"], res
    assert res["out_shape"] == [8, 32]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (task("return x * 0.0"), "constant_output"),
        (task("return torch.ones_like(x)"), "constant_output"),
        (task("return torch.softmax(x, dim=-1) * 1e-3"), "constant_output"),  # zeros pass the tolerance
        (task("return F.dropout(x, p=0.5, training=True)"), "nondeterministic"),
        (task("return x + torch.randn_like(x)"), "nondeterministic"),
        (task("return x.mean() * 1e-3 + torch.ones_like(x).cumsum(-1)"), "input_insensitive"),
        (
            task(
                "return torch.tanh(x) + 0 * y",
                inputs="[torch.randn(batch_size, dim), torch.randn(batch_size, dim)]",
            ).replace("forward(self, x, *rest)", "forward(self, x, y)"),
            "input_insensitive",
        ),
        (
            task("return torch.tanh(x) + 0.0 * self.fc(x)", init="self.fc = nn.Linear(dim, dim)"),
            "weight_insensitive",
        ),
        (task("return torch.log(x)"), "nonfinite"),
        (task("return x[:, :3]"), "shape_mismatch"),
        (task("return x @ torch.ones(3, 3)"), "eager_error"),
        (task("return x +"), "invalid_source"),
        (task("return x", init="raise RuntimeError('boom')"), "init_error"),
    ],
    ids=[
        "zero",
        "ones",
        "zeros-pass",
        "dropout",
        "randn",
        "mean",
        "unused-input",
        "unused-weight",
        "log",
        "shape",
        "crash",
        "syntax",
        "init",
    ],
)
def test_planted_bad_tasks_are_rejected(source, reason):
    res = run(source, expect_shape=[8, 64])
    assert not res["ok"] and res["reason"] == reason, res


def test_inputs_that_never_change_are_rejected():
    fixed = "[torch.arange(batch_size * dim, dtype=torch.float32).reshape(batch_size, dim) / 100]"
    res = run(task("return torch.tanh(x)", inputs=fixed), expect_shape=[8, 64])
    assert res["reason"] == "input_insensitive", res


def test_compile_mismatch_is_a_reason():
    # A forward whose compiled graph computes something else than eager must be dropped.
    src = task("return torch.tanh(x) * (2.0 if torch.compiler.is_compiling() else 1.0)")
    assert run(src, expect_shape=[8, 64])["ok"]  # eager-only checks see nothing wrong
    res = run(src, expect_shape=[8, 64], compile_backend="eager")
    assert res["reason"] == "compile_mismatch_eager", res


def test_size_overrides_rewrite_only_module_constants():
    src = task("return torch.tanh(x)")
    out = apply_overrides(src, {"dim": 16, "batch_size": 2})
    assert "dim = 16" in out and "batch_size = 2" in out and out.count("dim = 64") == 0
    assert run(src, overrides={"dim": 16, "batch_size": 2}, expect_shape=[2, 16])["ok"]
    with pytest.raises(ValueError, match="no_such"):
        apply_overrides(src, {"no_such": 1})


@pytest.mark.integration
def test_pool_survives_hangs_and_crashes():
    """The pool's own mechanics, on a torch-free target: the limit runs from the moment a worker is ready, so
    the no-op tasks finish far inside it however loaded the machine is, while the hang always exceeds it."""
    payloads = {
        "good": {"echo": 1},
        "hang": {"sleep_s": 600},
        "crash": {"exit": 9},
        "good2": {"echo": 2},
    }
    results = {}
    with WorkerPool("tests.data.pool_targets:act", 2, timeout_s=5, preload="") as pool:
        for k, p in payloads.items():
            pool.submit(k, p)
        while len(results) < len(payloads):
            results.update(dict(pool.poll(1.0)))
    assert results["good"] == {"ok": True, "echo": 1} and results["good2"] == {"ok": True, "echo": 2}
    assert results["hang"]["reason"] == "timeout"
    assert results["crash"]["reason"] == "worker_crash" and "exit code 9" in results["crash"]["detail"]


@pytest.mark.integration
def test_check_task_runs_in_the_pool_and_its_crash_is_reported():
    """check_task through the pool (a generous limit: a loaded machine's first torch call is slow)."""
    payloads = {
        "good": {"source": GOOD, "expect_shape": [8, 32], "compile_backend": "none"},
        "crash": {"source": task("import os; os._exit(9)"), "compile_backend": "none"},
    }
    results = {}
    with WorkerPool("research.data.checks:check_task", 2, timeout_s=300) as pool:
        for k, p in payloads.items():
            pool.submit(k, p)
        while len(results) < len(payloads):
            results.update(dict(pool.poll(1.0)))
    assert results["good"]["ok"], results["good"]
    assert results["crash"]["reason"] == "worker_crash"


# --- decontamination -------------------------------------------------------------------------------------

NEAR_COPY = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    '''Renamed and resized, otherwise the eval problem.'''

    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.convolution = nn.Conv2d(c_in, c_out, k, padding=1)
        self.channel_bias = nn.Parameter(torch.randn(c_out, 1, 1))

    def forward(self, inp):
        inp = self.convolution(inp)
        inp = F.gelu(inp)
        inp = inp + self.channel_bias
        return inp


batch_size = 16
c_in = 8
c_out = 64
height = 128
width = 128
k = 3


def get_inputs():
    return [torch.rand(batch_size, c_in, height, width)]


def get_init_inputs():
    return [c_in, c_out, k]
"""


def test_near_copy_of_an_eval_problem_is_found(eval_dir):
    index = EvalIndex.from_dir(eval_dir)
    assert len(index) == 6  # the README is not a problem
    name, score = index.nearest(NEAR_COPY)
    assert name.endswith("1_Conv2d_GELU_ChannelBias.py") and score > 0.9
    assert (
        similarity(NEAR_COPY, (eval_dir / "KernelBench/level2/1_Conv2d_GELU_ChannelBias.py").read_text())
        == score
    )
    _, unrelated = index.nearest(GOOD)
    assert unrelated < 0.9


def test_nearest_is_exact_despite_pruning(eval_dir):
    index = EvalIndex.from_dir(eval_dir)
    for src in (NEAR_COPY, GOOD):
        name, score = index.nearest(src)
        brute = max(
            (similarity(src, (eval_dir / "KernelBench" / n.split("KernelBench/")[-1]).read_text()), n)
            for n in index.names
        )
        assert (score, name) == brute  # the same SequenceMatcher ratio, so equal to the last bit


def test_missing_eval_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        EvalIndex.from_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no parseable"):
        EvalIndex.from_dir(tmp_path / "empty")


# --- GPU runtime window (fake sandbox client) -------------------------------------------------------------


class FakeClient:
    """The shape of ``kernels_env.client.SandboxClient.baseline`` results (see docs/sandbox.md)."""

    environment = {"gpu": "NVIDIA H200"}

    def __init__(self, ms, comparable=True):
        self.ms, self.comparable, self.calls = ms, comparable, []

    def baseline(self, reference, judge=None):
        self.calls.append(reference)
        if self.ms is None:
            raise RuntimeError("worker died")
        modes = {
            "eager": {"median_ms": self.ms},
            "compile": {"median_ms": self.ms / 2},
            "max-autotune": {"error": "x"},
        }
        return {"problem": "p", "device": "cuda", "baselines": modes, "comparable": self.comparable}


@pytest.mark.parametrize(
    ("ms", "reason"), [(0.2, "runtime_window"), (250.0, "runtime_window"), (5.0, None), (None, "gpu_error")]
)
def test_gpu_window_through_the_sandbox_client(ms, reason):
    rec = TaskRecord(id="t", source=GOOD)
    client = FakeClient(ms)
    got, detail = apply_window(rec, SandboxTimer(client).time(rec), 1.0, 100.0)
    assert got == reason, detail
    assert client.calls == [GOOD]
    if ms is not None:
        assert rec.baselines["NVIDIA H200"]["eager_ms"] == ms
        assert rec.baselines["NVIDIA H200"]["compile_ms"] == ms / 2


def test_gpu_window_refuses_cpu_mode_timings():
    rec = TaskRecord(id="t", source=GOOD)
    got, detail = apply_window(rec, SandboxTimer(FakeClient(5.0, comparable=False)).time(rec), 1.0, 100.0)
    assert got == "gpu_error" and "not comparable" in detail
    assert rec.baselines == {}


def test_gpu_window_talks_to_the_real_client_api():
    """The judge passed to the sandbox is a real kernels_env JudgeConfig timing eager only."""
    from kernels_env import client as sandbox
    from research.data.config import GpuFilterConfig
    from research.data.gpu_filter import eager_only_judge

    judge = eager_only_judge(sandbox, GpuFilterConfig(min_iters=7))
    assert isinstance(judge, sandbox.JudgeConfig) and judge.baselines == ["eager"]
    assert judge.timing.min_iters == 7 and judge.timing.l2_flush
