"""Batch mode without workers: solution discovery, resumability after an interruption, partial lines."""

from __future__ import annotations

import concurrent.futures
import json

import pytest

from kernels_env.reports import batch
from kernels_env.rules.config import BatchConfig


@pytest.fixture
def dirs(tmp_path):
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir()
    solutions.mkdir()
    for name in ("1_relu", "2_softmax", "10_matmul", "3_sum"):
        (problems / f"{name}.py").write_text("# problem\n")
    (problems / "_helpers.py").write_text("")
    for name in (
        "1_relu.py",
        "1_relu__triton.py",
        "10_matmul__a.py",
        "2_softmax__x__y.py",
        "9_missing.py",
        "notes.txt",
    ):
        (solutions / name).write_text("# solution\n")
    ws = solutions / "3_sum"
    (ws / "kernels").mkdir(parents=True)
    (ws / "model_new.py").write_text("")
    (ws / "kernels" / "k.cu").write_text("")
    (solutions / "2_softmax_dir").mkdir()  # no model_new.py: not a workspace
    return problems, solutions, tmp_path / "out"


def test_discover_maps_solutions_by_stem(dirs):
    problems, solutions, _ = dirs
    found, items, unmatched = batch.discover(problems, solutions)
    assert list(found) == ["1_relu", "2_softmax", "3_sum", "10_matmul"]  # natural order, _helpers skipped
    assert [(i.problem, i.key) for i in items] == [
        ("1_relu", "1_relu.py"),
        ("1_relu", "1_relu__triton.py"),
        ("2_softmax", "2_softmax__x__y.py"),
        ("3_sum", "3_sum"),
        ("10_matmul", "10_matmul__a.py"),
    ]
    assert unmatched == ["9_missing.py"]
    with pytest.raises(FileNotFoundError, match="problems directory"):
        batch.discover(problems / "nope", solutions)


class FakeClient:
    """Stands in for SandboxClient: answers instantly, and can be told to be interrupted after n results."""

    instances: list = []

    interrupt_after: int | None = None

    def __init__(self, sandbox, judge):
        self.calls: list[str] = []
        self.interrupt_after = FakeClient.interrupt_after
        FakeClient.instances.append(self)

    def start(self):
        pass

    def close(self):
        pass

    def submit(self, reference, solution, judge=None, *, problem, solution_name):
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append(solution_name)
        f = concurrent.futures.Future()
        f.set_result(
            {
                "problem": problem,
                "solution": solution_name,
                "status": "correct",
                "reward": 1.0,
                "speedups": {"eager": 2.0},
                "timings": {"comparable": True},
            }
        )
        return f


def test_interrupted_batch_resumes_without_duplicates(dirs, monkeypatch, capsys):
    problems, solutions, out = dirs
    monkeypatch.setattr(batch, "SandboxClient", FakeClient)
    cfg = BatchConfig(
        problems_dir=str(problems),
        solutions_dir=str(solutions),
        out_dir=str(out),
        progress=False,
        plot=False,
        max_in_flight=1,
    )
    FakeClient.interrupt_after = 2
    with pytest.raises(KeyboardInterrupt):
        batch.run_batch(cfg)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2
    with open(out / "results.jsonl", "a") as f:
        f.write('{"problem": "3_sum", "solution": "3_s')  # torn last line of a killed process
    FakeClient.interrupt_after = None
    summary = batch.run_batch(cfg)
    second = FakeClient.instances[-1].calls
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    keys = [rec["solution"] for rec in records]
    assert sorted(keys) == sorted(set(keys)), "no duplicates"
    assert len(keys) == 5 and len(second) == 3 and not set(second) & set(keys[:2])
    assert summary["num_solutions"] == 5 and summary["num_problems"] == 4
    assert summary["fast_p"]["eager"]["1"] == pytest.approx(1.0)
    assert json.loads((out / "summary.json").read_text())["num_solutions"] == 5
    started = len(FakeClient.instances)
    batch.run_batch(cfg)  # a third run has nothing to do: no sandbox is even started
    assert len(FakeClient.instances) == started
    assert len((out / "results.jsonl").read_text().splitlines()) == 5


def test_read_results_tolerates_garbage(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"solution": "a"}\nnot json\n{"solution": "b"}\n{"solution": "c", "x": [1,')
    done = batch.read_results(path)
    assert set(done) == {"a", "b"}
    assert path.read_text().endswith('{"solution": "b"}\n'), "the partial last line is cut off"
