"""Every request ends in a verdict, and the judge never blames the candidate for its own failure (issue 12).

- the judge's own exceptions (worker side: a ``harness_error`` reply; client side: the assembly) are
  ``judge_error`` verdicts with the judge's traceback and no reward, never an exception from ``evaluate``;
- an exception that escaped the judge's wrappers is attributed by its traceback (candidate / reference /
  judge); a compile child may claim a judge error only before candidate code ran;
- a comparison whose error overflows to inf is an ``incorrect`` verdict (it crashed the judge);
- broken references are ``reference_error`` (no reward), never the candidate's ``protocol_forgery``;
- importing has its own budget: an import hang is a ``timeout`` naming the import, a build is not cut short.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

from kernels_env.client import SandboxClient
from kernels_env.judge.assemble import result as assemble
from kernels_env.judge.build.compile_stage import _parse_report
from kernels_env.judge.run.verdict import unexpected
from kernels_env.rules import messages
from kernels_env.rules.result import JUDGE_ERROR, REFERENCE_ERROR, validate
from kernels_env.runtime import supervisor

from .conftest import FAST, RELU_PROBLEM, RELU_TRITON, cpu_config, relu_with, src

REF = src(RELU_PROBLEM)
GOOD = src(RELU_TRITON)


def check(result: dict, status: str) -> dict:
    validate(result)
    json.dumps(result)
    assert result["status"] == status, (result["status"], result["error"], result["messages"])
    return result


# --- the judge's own failures -------------------------------------------------------------------------------


def test_a_harness_error_reply_is_a_judge_error_verdict(client, monkeypatch):
    """The run worker's main loop caught an exception of the judge (``harness_error``): before, evaluate
    raised SandboxError; now the verdict carries the worker's traceback and withholds the reward."""
    call = supervisor.Worker.call
    trace = 'Traceback (most recent call last):\n  File "harness.py", line 1\nValueError: judge bug'

    def broken_run_worker(worker, request, timeout_s):
        if isinstance(request, messages.EvaluateRequest):
            return messages.Reply(id=request.id, payload={"harness_error": trace})
        return call(worker, request, timeout_s)

    monkeypatch.setattr(supervisor.Worker, "call", broken_run_worker)
    res = check(client.evaluate(REF, GOOD, judge=FAST), JUDGE_ERROR)
    assert res["reward"] is None and "not the candidate's fault" in res["error"]
    assert "ValueError: judge bug" in res["error"]
    assert any(m["kind"] == "traceback" and "judge bug" in m["text"] for m in res["messages"])


def test_an_exception_while_assembling_is_a_judge_error_verdict(client, monkeypatch):
    def broken(*args):
        raise ZeroDivisionError("assembly bug")

    monkeypatch.setattr(assemble, "add_reward", broken)
    res = check(client.evaluate(REF, GOOD, judge=FAST), JUDGE_ERROR)
    assert res["reward"] is None and "ZeroDivisionError: assembly bug" in res["error"]
    assert "add_reward" in next(m["text"] for m in res["messages"] if m["kind"] == "traceback")


def _module(path: Path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raised(fn, *args) -> BaseException:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the exception is what the test inspects
        return exc
    raise AssertionError("did not raise")


def test_an_escaped_exception_is_attributed_by_its_traceback(tmp_path):
    """The harness's last resort (``verdict.unexpected``): whose code raised decides the verdict."""
    sol_dir, ref_dir = tmp_path / "solution", tmp_path / "reference"
    sol = _module(sol_dir / "sol.py", "def train(mode):\n    raise KeyError('candidate')\n")
    ref = _module(ref_dir / "ref.py", "def spec():\n    raise TypeError('reference')\n")

    def judge_step(callback=None):  # judge code, calling back into the candidate or the reference
        if callback is not None:
            callback(True)
        return {}["judge"]

    candidate = unexpected(_raised(judge_step, sol.train), "load", sol_dir, ref_dir)
    assert candidate["status"] == "runtime_error" and "KeyError: 'candidate'" in candidate["error"]
    assert "tests/" not in candidate["messages"][0]["text"]  # trimmed to the candidate's frames
    reference = unexpected(_raised(judge_step, lambda _: ref.spec()), "correctness", sol_dir, ref_dir)
    assert reference == {"problem_error": "reference failed: TypeError: reference"}
    judge = unexpected(_raised(judge_step), "correctness", sol_dir, ref_dir)
    assert judge["status"] == JUDGE_ERROR and judge["stage"] == "correctness"
    assert "judge_step" in judge["messages"][0]["text"] and judge["messages"][0]["origin"] == "judge"


def test_a_compile_child_claims_a_judge_error_only_before_candidate_code():
    req = type("R", (), {"solution": type("S", (), {"text": "x = 1\n", "files": None})()})()
    line = lambda v: json.dumps(v).encode() + b"\n"  # noqa: E731
    claim = {"judge_error": "OSError: disk full", "traceback": "..."}
    assert _parse_report(line(claim), req) == claim  # no "reference ok" line yet: no candidate code ran
    late = _parse_report(line({"reference": "ok"}) + line(claim), req)  # a candidate dodging its -1
    assert late["check"] == "protocol_forgery"


def test_an_overflowing_comparison_is_incorrect_not_a_crash(client):
    """The red-team finding end to end: |got - expected| overflows float32, the mismatch message formatted
    "inf" with a float format and the judge crashed (the candidate was reported as a runtime_error)."""
    huge = REF.replace("return torch.relu(x)", "return torch.relu(x) * 3.0e38")
    negate = """
        import triton
        import triton.language as tl

        @triton.jit
        def _negate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(out_ptr + offs, tl.where(x > 0, x * -3.0e38, 0.0), mask=offs < n)
    """
    body = "out = torch.empty_like(x)\n_negate[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)"
    res = check(
        client.evaluate(huge, relu_with(body + "\nreturn out", header=negate), judge=FAST), "incorrect"
    )
    assert "values differ" in res["error"] and "max abs error inf" in res["error"]


# --- broken references --------------------------------------------------------------------------------------


def test_broken_references_are_reference_errors(client, tmp_path):
    empty = tmp_path / "empty_ref.py"
    empty.write_text("")
    res = check(client.evaluate(empty, GOOD, judge=FAST), REFERENCE_ERROR)  # was: protocol_forgery
    assert res["reward"] is None and res["check"] is None and res["stage"] == "compile"
    assert "lacks Model, get_inputs, get_init_inputs" in res["error"]
    raising = REF.replace("return torch.relu(x)", "raise RuntimeError('reference bug')")
    res = check(client.evaluate(raising, GOOD, judge=FAST), REFERENCE_ERROR)  # was: BrokenReference raised
    assert "Model.forward failed: RuntimeError: reference bug" in res["error"] and res["reward"] is None


# --- the import budget --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def imports(cache_dir):
    """A 3 s import budget inside a 40 s compile budget."""
    with SandboxClient(cpu_config(cache_dir, import_timeout_s=3, compile_timeout_s=40)) as sb:
        yield sb


def test_an_import_hang_is_a_timeout_of_the_import(imports):
    hang = relu_with("return relu(x)", header="while True:\n    pass")
    res = check(imports.evaluate(REF, hang, judge=FAST), "timeout")
    assert res["stage"] == "compile" and "import stage" in res["error"] and "3 s import limit" in res["error"]
    assert res["durations_s"]["compile"] < 15  # well within the compile budget of 40 s
    res = check(imports.evaluate("while True:\n    pass\n" + REF, GOOD, judge=FAST), REFERENCE_ERROR)
    assert "reference import exceeded the 3 s import limit" in res["error"]


def test_a_build_is_not_cut_short_by_the_import_budget(imports):
    """Time in a process the import started (nvcc, ninja, the NVRTC helper: here a 5 s stand-in that runs
    in the compile stage only, as a build whose result is cached would) counts against the compile budget."""
    build = "import os, subprocess\nif os.environ.get('KERNELS_ENV_BUILD_ONLY') == '1':\n"
    build += "    subprocess.run(['sleep', '5'], check=True)"
    res = check(imports.evaluate(REF, relu_with("return relu(x)", header=build), judge=FAST), "correct")
    assert res["durations_s"]["compile"] > 5


# --- inputs the user gets wrong: one line naming what is wrong ----------------------------------------------


def _batch_config(problems: Path, solutions: Path, out: Path):
    from kernels_env.rules.config import BatchConfig

    return BatchConfig(problems_dir=str(problems), solutions_dir=str(solutions), out_dir=str(out), plot=False)


@pytest.mark.parametrize(
    ("problem_files", "solution_files", "needle"),
    [
        ([], ["1_relu.py"], "no problems in"),
        (["1_relu.py"], [], "no solutions in"),
        (["1_relu.py"], ["notes.txt"], "no solutions in"),
        (["1_relu.py"], ["2_other.py", "3_x__a.py"], "none of the 2 solutions in"),
    ],
)
def test_a_batch_with_nothing_to_judge_is_an_error(tmp_path, problem_files, solution_files, needle):
    """Before: exit 0 and a results path it never wrote."""
    from kernels_env.reports.batch import run_batch

    problems, solutions, out = tmp_path / "p", tmp_path / "s", tmp_path / "out"
    for directory, files in ((problems, problem_files), (solutions, solution_files)):
        directory.mkdir()
        for name in files:
            (directory / name).write_text("# x\n")
    with pytest.raises(ValueError, match=needle) as info:
        run_batch(_batch_config(problems, solutions, out))
    assert "\n" not in str(info.value) and not out.exists()  # one line; nothing written


def test_a_binary_source_is_named_in_the_error(tmp_path, monkeypatch):
    from kernels_env.judge.build.sources import read_source

    binary = tmp_path / "1_relu__png.py"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    with pytest.raises(
        ValueError, match=r"solution .*1_relu__png\.py: not UTF-8 text \(byte 0x89 at offset 0\)"
    ):
        read_source(binary, "solution")
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "model_new.py").write_text("")
    (ws / "kernels" / "k.cu").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match=r"workspace .*ws: file .*k\.cu: not UTF-8 text"):
        read_source(ws, "solution", allow_workspace=True)
    good = tmp_path / "ok.py"
    good.write_text("x = 1\n")

    def unreadable(self, *args, **kwargs):  # root reads everything: the permission error is simulated
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", unreadable)
    with pytest.raises(ValueError, match=r"reference .*ok\.py: cannot be read: Permission denied"):
        read_source(good, "reference")


def test_a_gpu_summary_says_why_timings_are_missing_and_counts_no_verdicts_apart():
    from kernels_env.rules.summary import format_summary, summarize

    def r(problem, status):
        return {"problem": problem, "solution": f"{problem}.py", "status": status, "speedups": {},
                "timings": None, "reward": None if status in (JUDGE_ERROR, REFERENCE_ERROR) else -1.0,
                "environment": {"device": "cuda"}}  # fmt: skip

    results = [r("A", "incorrect"), r("B", JUDGE_ERROR), r("C", REFERENCE_ERROR), r("D", "compile_error")]
    s = summarize(results, ["A", "B", "C", "D", "E"])
    text = format_summary(s)
    assert "CPU mode" not in text and "no solution was correct, so none was timed" in text
    assert s["no_verdict"] == {"judge_error": {"count": 1, "problems": ["B"]},
                               "reference_error": {"count": 1, "problems": ["C"]},
                               "insufficient_memory": {"count": 0, "problems": []},
                               "toolchain_missing": {"count": 0, "problems": []},
                               "infra_error": {"count": 0, "problems": []}}  # fmt: skip
    assert s["candidate_failures"] == 2 and s["fast_p"]["eager"]["0"] == 0.0 and s["num_problems"] == 5
    assert "1 judge_error (B), 1 reference_error (C)" in text and "candidate failures: 2" in text
    cpu = summarize([{**results[0], "environment": {"device": "cpu"}}], ["A"])
    assert "CPU mode" in format_summary(cpu)


def _cli(*args: str, cache: Path, timeout: int = 300):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "kernels_env", *args, "--device", "cpu", "--cache-dir", str(cache)]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout)


def test_cli_input_errors_are_one_line(tmp_path, cache_dir):
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\x00\xff\xfe binary")
    ref = tmp_path / "1_relu.py"
    ref.write_text(REF)
    out = _cli("evaluate", "--reference", str(ref), "--solution", str(binary), cache=cache_dir)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().count("\n") == 0 and "bin.py: not UTF-8 text" in out.stderr
    (tmp_path / "problems").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "problems" / "1_relu.py").write_text(REF)
    results = tmp_path / "out" / "r.jsonl"
    args = ("batch", "--problems", str(tmp_path / "problems"), "--solutions", str(tmp_path / "solutions"))
    out = _cli(*args, "--out", str(results), cache=cache_dir)
    assert out.returncode == 2 and out.stdout == "" and not results.parent.exists()
    assert out.stderr.strip().count("\n") == 0 and "error: no solutions in" in out.stderr


def test_cli_batch_records_reference_errors_and_names_unreadable_files(tmp_path, cache_dir):
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir()
    solutions.mkdir()
    (problems / "1_relu.py").write_text(REF)
    (problems / "2_broken.py").write_text(REF.replace("def get_inputs", "def get_inputs_typo"))
    (solutions / "1_relu.py").write_text(GOOD)
    (solutions / "1_relu__bin.py").write_bytes(b"\x89PNG\r\n")
    (solutions / "2_broken.py").write_text(GOOD)
    results = tmp_path / "out" / "r.jsonl"
    args = ("batch", "--problems", str(problems), "--solutions", str(solutions), "--out", str(results))
    out = _cli(*args, "--no-timing", "--num-trials", "2", "--no-progress", "--no-plot", cache=cache_dir)
    assert out.returncode == 1, out.stderr[-3000:]  # judged, but not everything got a verdict on a candidate
    by_name = {r["solution"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert {k: r["status"] for k, r in by_name.items()} == {
        "1_relu.py": "correct",
        "2_broken.py": REFERENCE_ERROR,
    }
    assert "lacks get_inputs" in by_name["2_broken.py"]["error"]
    assert "error: 1_relu__bin.py: solution" in out.stderr and "not UTF-8 text" in out.stderr
    assert "no verdict: 1 reference_error (2_broken)" in out.stdout
