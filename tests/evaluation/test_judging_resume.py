"""Resuming a judged solution set after its code or the checkout's problem file changed (issue 29 item 2),
with a fake client in process: the same rule as ``python -m kernels_env batch`` (``resume_results``)."""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path

from kernels_env.client import SandboxConfig
from research.evaluation import read_results
from research.evaluation.judging import judge_solutions
from research.evaluation.kernelbench import Problem
from research.evaluation.solution_sets import Solution, SolutionSet

from .conftest import FAST


class ReadingClient:
    """Verdicts from what it reads: a solution or problem saying "bug" is incorrect."""

    def __init__(self):
        self.calls: list[str] = []

    def submit(self, reference, solution, judge=None, *, problem, solution_name):
        self.calls.append(solution_name)
        bug = "bug" in Path(solution).read_text() + Path(reference).read_text()
        status = "incorrect" if bug else "correct"
        f = concurrent.futures.Future()
        f.set_result({"problem": problem, "solution": solution_name, "status": status,
                      "reward": -1.0 if bug else 1.0, "speedups": {}, "timings": None})  # fmt: skip
        return f


def _set(checkout: Path, codes: dict[str, str]) -> SolutionSet:
    problem = Problem(1, 1, "relu", checkout / "level1" / "1_relu.py")
    sols = [Solution(f"level1/1_relu__s-{k}", k, "s", 1, problem, c, f"set:{k}") for k, c in codes.items()]
    return SolutionSet(sols, [], [], len(sols))


def _judge(sset, out, capsys):
    client = ReadingClient()
    judge_solutions(sset, out, SandboxConfig(), FAST, max_in_flight=1, progress=False, client=client)
    return sorted(c.split("-")[-1].removesuffix(".py") for c in client.calls), capsys.readouterr().out


def test_an_edited_solution_set_is_judged_again_in_place(tmp_path, capsys):
    """Before: a rerun skipped every key already in results.jsonl, whatever its code had become."""
    checkout, out = tmp_path / "kb", tmp_path / "out"
    (checkout / "level1").mkdir(parents=True)
    (checkout / "level1" / "1_relu.py").write_text("# the problem\n")
    codes = {"a": "# a bug\n", "b": "# fine\n", "c": "# fine too\n"}
    assert _judge(_set(checkout, codes), out, capsys)[0] == ["a", "b", "c"]
    calls, printed = _judge(_set(checkout, codes), out, capsys)
    assert calls == [] and "3 unchanged, skipped; 0 re-judged; 0 new" in printed
    assert "level1/1_relu__s-a.py: incorrect, reward -1" not in printed  # nothing judged, nothing said

    calls, printed = _judge(_set(checkout, {**codes, "a": "# fixed\n", "d": "# new\n"}), out, capsys)
    assert calls == ["a", "d"] and "2 unchanged, skipped; 1 re-judged; 1 new" in printed
    assert "level1/1_relu__s-a.py: correct, reward 1" in printed.splitlines()
    (checkout / "level1" / "1_relu.py").write_text("# the problem, now with a bug\n")
    calls, printed = _judge(_set(checkout, {**codes, "a": "# fixed\n", "d": "# new\n"}), out, capsys)
    assert calls == ["a", "b", "c", "d"] and "0 unchanged, skipped; 4 re-judged; 0 new" in printed
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["record_id"] for r in lines) == ["a", "b", "c", "d"], "one line per solution"
    final = read_results(out / "results.jsonl")
    assert {r["record_id"]: r["status"] for r in final.values()} == dict.fromkeys("abcd", "incorrect")
