"""The toy task set: decontaminated against KernelBench, disjoint splits with a held-out category, sizes in
the eager window, reproducible, and references that really are the library's."""

from __future__ import annotations

from pathlib import Path

import pytest

from research.data.decontam import EvalIndex, similarity
from research.toyenv import HELDOUT, SPLITS, TEST, TOY_OPS, TRAIN, ToyTaskConfig, ToyTaskSet, make_tasks
from research.toyenv.tasks import MAX_ELEMENTS, default_decontam_dir

from .conftest import SMALL

KERNELBENCH = default_decontam_dir()


@pytest.fixture(scope="module")
def decontaminated():
    if not KERNELBENCH or not Path(KERNELBENCH).is_dir():
        pytest.skip("no KernelBench checkout (set KERNELBENCH_DIR or provide ../shared/kernelbench)")
    return make_tasks(ToyTaskConfig(num_train=40, num_test=10, num_heldout=10, decontam_dir=KERNELBENCH))


def test_decontaminated_against_kernelbench_levels_1_to_3(decontaminated):
    d = decontaminated.manifest["decontamination"]
    assert d["ran"] and d["eval_problems"] >= 250
    levels = {Path(n).parts[0] for n in EvalIndex.from_dir(KERNELBENCH).names}
    assert {"level1", "level2", "level3"} <= levels
    for t in decontaminated.tasks:
        name, score = t.nearest_eval
        assert name and score <= 0.9
    # the recorded score is the real similarity to that problem
    t = decontaminated.tasks[0]
    ref = (Path(KERNELBENCH) / t.nearest_eval[0]).read_text()
    assert abs(similarity(t.source, ref) - t.nearest_eval[1]) < 1e-3


def test_decontamination_drops_what_is_too_close():
    if not KERNELBENCH or not Path(KERNELBENCH).is_dir():
        pytest.skip("no KernelBench checkout")
    strict = make_tasks(ToyTaskConfig(num_train=10, num_test=3, num_heldout=3, decontam_threshold=0.7,
                                      decontam_dir=KERNELBENCH))  # fmt: skip
    d = strict.manifest["decontamination"]
    assert d["dropped"] and strict.manifest["drops"]["contaminated"] == len(d["dropped"])
    assert all(x["score"] > 0.7 for x in d["dropped"])
    assert all(t.nearest_eval[1] <= 0.7 for t in strict.tasks)


def test_splits_are_disjoint_and_hold_out_a_category(tasks):
    by = {s: tasks.split(s) for s in SPLITS}
    assert [len(by[s]) for s in (TRAIN, TEST, HELDOUT)] == [
        SMALL.num_train,
        SMALL.num_test,
        SMALL.num_heldout,
    ]
    ids = [t.id for t in tasks.tasks]
    assert len(ids) == len(set(ids))
    sigs = [t.signature for t in tasks.tasks]
    assert len(sigs) == len(set(sigs))  # no chain appears in two splits (or twice)
    cat = SMALL.heldout_category
    for t in by[TRAIN] + by[TEST]:
        assert all(TOY_OPS[o].category != cat for o in t.ops), t.ops
    for t in by[HELDOUT]:
        assert any(TOY_OPS[o].category == cat for o in t.ops), t.ops


def test_reproducible_and_round_trips_through_disk(tasks, tmp_path):
    again = make_tasks(SMALL)
    assert [t.to_dict() for t in again.tasks] == [t.to_dict() for t in tasks.tasks]
    tasks.save(tmp_path / "tasks.jsonl")
    loaded = ToyTaskSet.load(tmp_path / "tasks.jsonl")
    assert loaded.tasks == tasks.tasks and loaded.manifest["kept"] == tasks.manifest["kept"]
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        ToyTaskSet.load(tmp_path / "bad.jsonl")


def test_sizes_and_sources(tasks):
    lo, hi = SMALL.target_ms
    for t in tasks.tasks:
        assert 2 <= len(t.ops) <= 4 and t.cols in SMALL.cols_choices and t.rows % 64 == 0
        assert t.rows * t.cols <= MAX_ELEMENTS
        assert 0.5 * lo <= t.est_ms <= 1.5 * hi, (t.id, t.est_ms)
        assert f"batch_size = {t.rows}" in t.source and f"in_features = {t.cols}" in t.source
        small = t.at_size(6, 100)
        assert "batch_size = 6" in small.source and "in_features = 100" in small.source
        assert small.source.split("batch_size")[0] == t.source.split("batch_size")[0]
        assert small.calls == t.calls
    # both kinds of column counts occur, so tail masks matter
    assert {t.cols & (t.cols - 1) == 0 for t in tasks.tasks} == {True, False}


def test_config_errors():
    with pytest.raises(ValueError, match="unknown toy ops"):
        make_tasks(ToyTaskConfig(ops=["relu", "conv2d"], decontam_dir=None))
    with pytest.raises(ValueError, match="held-out category"):
        make_tasks(ToyTaskConfig(ops=["relu", "softmax"], decontam_dir=None))
