"""Exact resume: a run killed with SIGKILL mid-way and restarted writes the same metrics (bit for bit on
CPU, timings aside) as an uninterrupted run; metrics JSONL, TensorBoard events and curves are written."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from research import rl

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STEPS = 6


def run(out, sleep=0.0, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["XLA_FLAGS"] = "--xla_backend_optimization_level=0"  # tiny programs: compile time dominates
    return subprocess.Popen(
        [sys.executable, str(HERE / "resume_run.py"), str(out), str(STEPS), str(sleep)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def strip(rows):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def tb_scalars(tb_dir):
    """(tag, step) pairs of every scalar event (TFRecord framing: length, crc, data, crc)."""
    from tensorboardX.proto import event_pb2

    out = []
    for f in sorted(Path(tb_dir).glob("events.out.tfevents.*")):
        data = f.read_bytes()
        i = 0
        while i + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[i : i + 8])
            ev = event_pb2.Event.FromString(data[i + 12 : i + 12 + n])
            out += [(v.tag, ev.step) for v in ev.summary.value]
            i += 12 + n + 4
    return out


def test_sigkill_then_resume_gives_the_same_metrics(tmp_path):
    straight = run(tmp_path / "a")
    interrupted = run(tmp_path / "b", sleep=1.0)
    metrics = tmp_path / "b" / "metrics.jsonl"
    deadline = time.time() + 400
    while time.time() < deadline and len(rl.read_metrics(metrics)) < 3:
        assert interrupted.poll() is None, interrupted.communicate()[1][-3000:]
        time.sleep(0.1)
    interrupted.send_signal(signal.SIGKILL)
    interrupted.communicate()
    killed_at = len(rl.read_metrics(metrics))
    assert 3 <= killed_at < STEPS
    ckpts = rl.CheckpointDir(tmp_path / "b" / "checkpoints").steps()
    assert ckpts and max(ckpts) < STEPS
    resumed = run(tmp_path / "b")
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    _, err = straight.communicate(timeout=600)
    assert straight.returncode == 0, err[-3000:]
    a, b = rl.read_metrics(tmp_path / "a"), rl.read_metrics(tmp_path / "b")
    assert [r["step"] for r in b] == list(range(1, STEPS + 1))
    assert strip(a) == strip(b)
    assert len({r["pg_loss"] for r in a}) == STEPS  # the metrics really change from step to step
    assert rl.CheckpointDir(tmp_path / "b" / "checkpoints").steps()[-1] == STEPS
    assert (tmp_path / "b" / "curves.png").stat().st_size > 10_000
    tags = tb_scalars(tmp_path / "a" / "tensorboard")
    assert ("pg_loss", STEPS) in tags and ("explained_variance", 1) in tags
