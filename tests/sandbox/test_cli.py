"""The command line end to end in CPU mode: evaluate, baseline, and a batch that is killed and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import RELU_PROBLEM, RELU_TRITON, relu_with, src

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, cache, timeout=300):
    cmd = [
        sys.executable,
        "-m",
        "kernels_env",
        *args,
        "--device",
        "cpu",
        "--cache-dir",
        str(cache),
        "--compile-workers",
        "1",
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_evaluate_and_baseline(tmp_path, cache_dir):
    ref, good, bad = tmp_path / "1_relu.py", tmp_path / "good.py", tmp_path / "bad.py"
    ref.write_text(src(RELU_PROBLEM))
    good.write_text(src(RELU_TRITON))
    bad.write_text(relu_with("return relu(x, shift=0.5)"))
    out = cli(
        "evaluate", "--reference", ref, "--solution", good, "--json", "--num-trials", "2", cache=cache_dir
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert result["status"] == "correct" and result["solution"] == "good.py" and result["problem"] == "1_relu"
    out = cli("evaluate", "--reference", ref, "--solution", bad, "--no-timing", cache=cache_dir)
    assert out.returncode == 1 and "INCORRECT" in out.stdout and "values differ" in out.stdout
    out = cli("evaluate", "--reference", ref, "--solution", tmp_path / "missing.py", cache=cache_dir)
    assert out.returncode == 2 and "no such file" in out.stderr
    out = cli("evaluate", "--reference", ref, "--solution", good, "--protocol", "nope", cache=cache_dir)
    assert out.returncode == 2 and "unknown judge protocol" in out.stderr
    out = cli("baseline", "--reference", ref, "--json", "--baselines", "eager", cache=cache_dir)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["baselines"]["eager"]["median_ms"] > 0


def test_batch_killed_then_resumed(tmp_path, cache_dir):
    problems, solutions = tmp_path / "problems", tmp_path / "solutions"
    problems.mkdir()
    solutions.mkdir()
    (problems / "1_relu.py").write_text(src(RELU_PROBLEM))
    (problems / "2_other.py").write_text(src(RELU_PROBLEM))  # a problem without a solution
    (solutions / "1_relu.py").write_text(src(RELU_TRITON))
    (solutions / "1_relu__wrong.py").write_text(relu_with("return relu(x, shift=0.5)"))
    (solutions / "1_relu__slow.py").write_text(relu_with("import time\ntime.sleep(2)\nreturn relu(x)"))
    (solutions / "1_relu__syntax.py").write_text("def (:\n")
    out_file = tmp_path / "out" / "run.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "kernels_env",
        "batch",
        "--problems",
        str(problems),
        "--solutions",
        str(solutions),
        "--out",
        str(out_file),
        "--device",
        "cpu",
        "--cache-dir",
        str(cache_dir),
        "--compile-workers",
        "1",
        "--no-timing",
        "--num-trials",
        "2",
        "--no-progress",
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out_file.exists() and out_file.read_text().count("\n") >= 1:
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up
    proc.wait()
    partial = out_file.read_text().count("\n")
    assert 1 <= partial < 4
    judged_first = {json.loads(line)["solution"] for line in out_file.read_text().splitlines()}
    with open(out_file, "a") as f:
        f.write('{"solution": "1_relu__slow.py", "stat')  # as if killed in the middle of a write
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    names = sorted(r["solution"] for r in records)
    assert names == ["1_relu.py", "1_relu__slow.py", "1_relu__syntax.py", "1_relu__wrong.py"]
    by_name = {r["solution"]: r["status"] for r in records}
    assert by_name == {
        "1_relu.py": "correct",
        "1_relu__slow.py": "correct",
        "1_relu__syntax.py": "compile_error",
        "1_relu__wrong.py": "incorrect",
    }
    summary = json.loads((out_file.parent / "run.summary.json").read_text())
    assert summary["problems_without_solution"] == ["2_other"]
    assert summary["fast_p"]["eager"]["0"] == 0.25  # 1_relu: 2 of 4 correct (0.5); 2_other missing (0)
    assert "fast_1.5" in out.stdout and (out_file.parent / "run.speedups.png").exists()
    # each verdict is printed as it lands (no progress bar here), and only what was left was judged
    landed = {line.split(": ", 1)[0] for line in out.stdout.splitlines() if line.startswith("1_relu")}
    assert landed == set(by_name) - judged_first
    assert f"{partial} unchanged, skipped; 0 re-judged; {4 - partial} new" in out.stdout
    # a fixed solution rerun into the same file is judged again, in place of its old line
    (solutions / "1_relu__wrong.py").write_text(src(RELU_TRITON))
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "3 unchanged, skipped; 1 re-judged; 0 new" in out.stdout
    assert "1_relu__wrong.py: correct, reward" in out.stdout
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert {r["solution"]: r["status"] for r in records} == {**by_name, "1_relu__wrong.py": "correct"}
    assert len(records) == 4
