"""benchmarks.models.peak_memory: the planned-peak formula on a program whose memory is known, and the --smoke
run (CPU, tiny shapes, every case in a subprocess) records every case with sane, ordered sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest


def test_planned_peak_formula_on_known_sizes():
    import jax
    import jax.numpy as jnp

    from benchmarks.models import peak_memory as bench

    x = jax.ShapeDtypeStruct((256, 128), jnp.float32)  # 128 KiB
    nbytes = int(np.prod(x.shape)) * 4
    plain = bench.planned_peak(jax.jit(lambda a: a * 2.0 + 1.0).lower(x).compile())
    assert plain["argument"] == nbytes and plain["output"] == nbytes and plain["alias"] == 0
    assert plain["planned"] == plain["argument"] + plain["output"] - plain["alias"] + plain["temp"]
    assert plain["planned"] >= 2 * nbytes
    # Donated and aliased by the output: the buffer counts once.
    donated = bench.planned_peak(jax.jit(lambda a: a * 2.0 + 1.0, donate_argnums=0).lower(x).compile())
    assert donated["alias"] == nbytes
    assert donated["planned"] == nbytes + donated["temp"]


@pytest.mark.slow
def test_peak_memory_smoke(tmp_path):
    from benchmarks.models import peak_memory as bench

    out = tmp_path / "peak_memory.json"
    record = bench.main(["--smoke", "--run", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(record, default=str))
    cases = {(c["seq"], c["learner"]): c for c in record["cases"]}
    assert set(cases) == {(s, ln) for s in bench.SMOKE_SEQS for ln in bench.LEARNERS}
    for key, c in cases.items():
        assert "error" not in c and "skipped" not in c, (key, c)
        mem, pred = c["memory"], c["predicted"]
        assert mem["planned"] > 0 and mem["argument"] > 0 and pred["total"] > 0, key
        assert mem["planned"] == mem["argument"] + mem["output"] - mem["alias"] + mem["temp"]
        assert c["ratios"]["planned_over_predicted"] == pytest.approx(mem["planned"] / pred["total"])
        # --run ran the same update on random weights (CPU keeps no memory stats: unmeasured there)
        assert "run_skipped" not in c and np.isfinite(c["metrics"]["actor_grad_norm"]), key
        assert ("critic_grad_norm" in c["metrics"]) == (key[1] == "actor+critic")
        # the state and batch are the update's arguments: the same bytes memory_plan counts as resident
        # (parameters + AdamW moments), plus the prepared batch's per-token arrays and the step and RNG
        batch_bytes = 16 * 4 * key[0] + 64  # fewer than sixteen [1, T] 4-byte arrays
        assert 0 <= mem["argument"] - pred["resident"] <= batch_bytes, key
    short, long_ = bench.SMOKE_SEQS
    for seq in bench.SMOKE_SEQS:
        actor, both = cases[(seq, "actor")], cases[(seq, "actor+critic")]
        assert both["memory"]["planned"] > actor["memory"]["planned"]
        # the critic's parameters and moments are arguments of the update too
        assert both["memory"]["argument"] > actor["memory"]["argument"]
        assert both["predicted"]["total"] > actor["predicted"]["total"]
    for learner in bench.LEARNERS:
        assert cases[(long_, learner)]["memory"]["planned"] >= cases[(short, learner)]["memory"]["planned"]
    assert "planned GiB" in record["table"]


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--models", "9b"], "9b"),
        (["--remat", "bogus"], "remat"),
        (["--attention", "flash"], "attention"),
        (["--mem-fraction", "0"], "mem-fraction"),
        (["--seqs", "8k"], "seqs"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, capsys, argv, word):
    from benchmarks.models import peak_memory as bench

    out = tmp_path / "peak.json"
    with pytest.raises(SystemExit) as exc:
        bench.main([*argv, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]
    assert not out.exists()  # checked before any case ran


def test_error_line_is_the_exception_not_jax_note():
    from benchmarks.models import peak_memory as bench

    stderr = (
        "Traceback (most recent call last):\n  File 'x.py', line 1\n    raise\n"
        "RuntimeError: cuDNN is not detected.\n"
        "--------------------\n"
        "For simplicity, JAX has removed its internal frames from the traceback of the following exception.\n"
    )
    assert bench._error_line(stderr) == "RuntimeError: cuDNN is not detected."
    assert bench._error_line("killed\n") == "killed"
    assert bench._error_line("") == "no output"


def test_failing_cases_are_recorded_and_the_rest_still_run(tmp_path):
    """cuDNN attention fails to compile on CPU: every case records its error line, none stops the run."""
    import jax

    from benchmarks.models import peak_memory as bench

    if jax.default_backend() != "cpu":
        pytest.skip("cuDNN attention compiles on a GPU")
    out = tmp_path / "peak_memory.json"
    record = bench.main(["--smoke", "--attention", "cudnn", "--out", str(out)])
    cases = json.loads(out.read_text())["cases"]
    assert len(cases) == len(bench.SMOKE_SEQS) * len(bench.LEARNERS) == len(record["cases"])
    assert all("cuDNN" in c["error"] and "memory" not in c for c in cases)
