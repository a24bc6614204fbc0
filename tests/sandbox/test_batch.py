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


# --- resuming after edits (issue 29 item 2) and a line per verdict (item 3) ------------------------------


class ReadingClient(FakeClient):
    """A fake judge whose verdict depends on what it reads: a solution or reference saying "bug" is incorrect,
    one saying "forbidden" is rejected; so a stale verdict kept for an edited file shows."""

    def submit(self, reference, solution, judge=None, *, problem, solution_name):
        from pathlib import Path

        sol = Path(solution)
        files = sorted(p for p in sol.rglob("*") if p.is_file()) if sol.is_dir() else [sol]
        texts = [p.read_text() for p in files]
        text = "\n".join(texts) + Path(reference).read_text()
        self.calls.append(solution_name)
        status = "incorrect" if "bug" in text else "rejected" if "forbidden" in text else "correct"
        f = concurrent.futures.Future()
        f.set_result(
            {
                "problem": problem,
                "solution": solution_name,
                "status": status,
                "check": "forbidden_op" if status == "rejected" else None,
                "reward": {"correct": 1.0}.get(status, -1.0),
                "speedups": {"eager": 2.0} if status == "correct" else {},
                "timings": {"comparable": True} if status == "correct" else None,
            }
        )
        return f


def _cfg(problems, solutions, out, **kw):
    kw = {"progress": False, "plot": False, "max_in_flight": 1, **kw}
    return BatchConfig(problems_dir=str(problems), solutions_dir=str(solutions), out_dir=str(out), **kw)


def _records(out):
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def test_plan_resume_keys_records_by_name_and_input_hashes():
    from kernels_env.rules.results_file import INPUTS, plan_resume

    h = {"reference": "r1", "solution": "s1"}
    done = {
        "same": {"solution": "same", INPUTS: dict(h)},
        "edited": {"solution": "edited", INPUTS: {**h, "solution": "s0"}},
        "ref_edited": {"solution": "ref_edited", INPUTS: {**h, "reference": "r0"}},
        "old": {"solution": "old"},  # written before hashes were recorded
        "unreadable": {"solution": "unreadable", INPUTS: dict(h)},
        "gone": {"solution": "gone", INPUTS: dict(h)},  # no longer in the directory: left alone
    }
    names = ["fresh", "same", "edited", "ref_edited", "old", "unreadable"]
    inputs = {n: (None if n == "unreadable" else dict(h)) for n in names}
    plan = plan_resume(inputs, done)
    assert plan.new == ["fresh"] and plan.unchanged == ["same"]
    assert plan.changed == ["edited", "ref_edited", "old", "unreadable"] and plan.unhashed == ["old"]
    assert plan.todo == {"fresh", "edited", "ref_edited", "old", "unreadable"}
    assert plan.line().startswith("1 unchanged, skipped; 4 re-judged; 1 new (1 re-judged because")


def test_an_edited_solution_or_reference_is_judged_again_in_place(dirs, monkeypatch, capsys):
    """Before: a fixed solution rerun into the same out dir kept its old verdict (resume matched names)."""
    problems, solutions, out = dirs
    monkeypatch.setattr(batch, "SandboxClient", ReadingClient)
    (solutions / "1_relu.py").write_text("# a bug\n")
    (solutions / "3_sum" / "kernels" / "k.cu").write_text("// forbidden\n")
    batch.run_batch(_cfg(problems, solutions, out))
    first = {r["solution"]: r["status"] for r in _records(out)}
    assert first["1_relu.py"] == "incorrect" and first["3_sum"] == "rejected" and len(first) == 5
    capsys.readouterr()

    before, started = (out / "results.jsonl").read_bytes(), len(FakeClient.instances)
    batch.run_batch(_cfg(problems, solutions, out))  # nothing changed: nothing judged, the file untouched
    assert len(FakeClient.instances) == started and (out / "results.jsonl").read_bytes() == before
    assert "5 unchanged, skipped; 0 re-judged; 0 new" in capsys.readouterr().out

    (solutions / "1_relu.py").write_text("# fixed\n")  # the fix
    (solutions / "3_sum" / "kernels" / "k.cu").write_text("// fine now\n")  # a workspace's other file
    (problems / "10_matmul.py").write_text("# problem with a bug\n")  # the reference changed
    (solutions / "2_softmax__x__y.py").unlink()
    batch.run_batch(_cfg(problems, solutions, out))
    assert len(FakeClient.instances) == started + 1
    assert sorted(FakeClient.instances[-1].calls) == ["10_matmul__a.py", "1_relu.py", "3_sum"]
    assert "1 unchanged, skipped; 3 re-judged; 0 new" in capsys.readouterr().out
    records = _records(out)
    names = [r["solution"] for r in records]
    assert len(names) == len(set(names)) == 5, "one record per solution (the removed one's is kept)"
    final = {r["solution"]: r["status"] for r in records}
    assert final == {
        "1_relu.py": "correct",
        "1_relu__triton.py": "correct",
        "2_softmax__x__y.py": "correct",
        "3_sum": "correct",
        "10_matmul__a.py": "incorrect",
    }
    assert all(set(r["inputs_sha256"]) == {"reference", "solution"} for r in records)


def test_results_without_input_hashes_are_judged_again_and_said_so(dirs, monkeypatch, capsys):
    problems, solutions, out = dirs
    monkeypatch.setattr(batch, "SandboxClient", ReadingClient)
    out.mkdir()
    old = {"problem": "1_relu", "solution": "1_relu.py", "status": "incorrect", "reward": -1.0}
    (out / "results.jsonl").write_text(json.dumps(old) + "\nnot json\n")  # an older version's file
    batch.run_batch(_cfg(problems, solutions, out))
    printed = capsys.readouterr().out
    assert "0 unchanged, skipped; 1 re-judged; 4 new (1 re-judged because their results were" in printed
    assert sorted(FakeClient.instances[-1].calls) == sorted(
        ["1_relu.py", "1_relu__triton.py", "2_softmax__x__y.py", "3_sum", "10_matmul__a.py"]
    )
    lines = (out / "results.jsonl").read_text().splitlines()
    assert lines[0] == "not json", "lines of no solution are kept as they were"
    assert [json.loads(x)["solution"] for x in lines[1:]].count("1_relu.py") == 1


def test_drop_records_rewrites_atomically_and_keeps_other_lines(tmp_path):
    from kernels_env.rules.results_file import drop_records

    path = tmp_path / "r.jsonl"
    text = '{"solution": "a", "v": 1}\nnot json\n{"solution": "b"}\n{"solution": "a", "v": 2}\n[1]\n'
    path.write_text(text)
    drop_records(path, {"a"})
    assert path.read_text() == 'not json\n{"solution": "b"}\n[1]\n'
    assert [p.name for p in tmp_path.iterdir()] == ["r.jsonl"], "no temporary file left behind"


@pytest.mark.parametrize("progress", [False, True])
def test_each_verdict_is_printed_as_it_lands(dirs, monkeypatch, capsys, progress):
    """Before: no line per solution (only a bar's postfix, and nothing at all without a bar)."""
    problems, solutions, out = dirs
    monkeypatch.setattr(batch, "SandboxClient", ReadingClient)
    (solutions / "1_relu__triton.py").write_text("# forbidden\n")
    (solutions / "10_matmul__a.py").write_text("# bug\n")
    batch.run_batch(_cfg(problems, solutions, out, progress=progress))
    lines = capsys.readouterr().out.splitlines()
    assert "1_relu__triton.py: rejected (forbidden_op), reward -1" in lines
    assert "10_matmul__a.py: incorrect, reward -1" in lines
    assert "1_relu.py: correct, reward 1, speedup eager 2.00x" in lines
    verdicts = [x for x in lines if x.split(":")[0] in {r["solution"] for r in _records(out)}]
    assert len(verdicts) == 5
