"""Loaders read KernelBench-format fixtures written by us, JSONL datasets with column maps, and records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research.data.loaders import ColumnMap, curriculum, guess_category, load_dataset, load_kernelbench
from research.data.records import TaskRecord, read_jsonl, write_jsonl


def test_kernelbench_dir_is_read_unchanged(eval_dir):
    recs = load_kernelbench(eval_dir)
    assert [r.id for r in recs] == [f"kb-L{lv}-{i}" for lv in (1, 2) for i in (1, 2, 3)]
    for r in recs:
        assert r.source == Path(r.meta["path"]).read_text()  # byte-for-byte, no rewriting
        assert r.origin == "kernelbench" and r.split == "test" and r.level in (1, 2)
    conv = next(r for r in recs if r.name == "1_Conv2d_GELU_ChannelBias")
    assert conv.ops[:1] == ["Conv2d"] and "gelu" in conv.ops and conv.category == "conv"
    # the same loader accepts the inner KernelBench dir and a single level dir, and filters levels
    assert len(load_kernelbench(eval_dir / "KernelBench")) == 6
    assert [r.level for r in load_kernelbench(eval_dir / "KernelBench" / "level2")] == [2, 2, 2]
    assert [r.level for r in load_kernelbench(eval_dir, levels=[1])] == [1, 1, 1]


def test_kernelbench_missing_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="level"):
        load_kernelbench(tmp_path)


def test_jsonl_dataset_with_column_mapping(tmp_path, eval_dir):
    src = (eval_dir / "KernelBench/level1/2_Tanh.py").read_text()
    rows = [
        {"task_name": "a", "code": src, "ops": json.dumps(["tanh"]), "data_source": "x"},
        {"task_name": "b", "code": src, "ops": "relu, tanh", "data_source": "y"},
    ]
    path = tmp_path / "ops6k.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recs = load_dataset(path, ColumnMap(id="task_name"))  # source column found by its common name "code"
    assert [r.id for r in recs] == ["a", "b"]
    assert recs[0].ops == ["tanh"] and recs[1].ops == ["relu", "tanh"]
    assert (
        recs[0].source == src
        and recs[0].meta == {"data_source": "x"}
        and recs[0].origin == "dataset:ops6k.jsonl"
    )
    recs = load_dataset(path, ColumnMap(source="code", ops=None, category="data_source"))
    assert recs[0].ops == ["tanh"] and recs[0].category == "x"  # ops parsed from the source
    with pytest.raises(KeyError, match="columns are"):
        load_dataset(path, ColumnMap(source="no_such_column"))


def test_parquet_needs_pyarrow_or_says_so(tmp_path):
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pyarrow"):
            load_dataset(path)
    else:
        pytest.skip("pyarrow installed: the error path cannot be exercised")


def test_records_round_trip_and_partial_lines(tmp_path):
    recs = [
        TaskRecord(id="x1", source="pass", ops=["relu"], baselines={"NVIDIA H200": {"eager_ms": 2.5}}),
        TaskRecord(id="x2", source="pass", level=2, meta={"k": 1}),
    ]
    path = tmp_path / "r.jsonl"
    assert write_jsonl(path, recs) == 2
    assert read_jsonl(path) == recs
    path.write_text(path.read_text() + '{"id": "x3", "sou')
    with pytest.raises(ValueError, match=r"r.jsonl:3: not valid JSON"):
        read_jsonl(path)
    unknown = TaskRecord.from_dict({"id": "y", "source": "s", "extra_col": 7})
    assert unknown.meta == {"extra_col": 7}
    with pytest.raises(ValueError, match="'id' and 'source'"):
        TaskRecord.from_dict({"code": "x"})


def test_curriculum_orders_by_level_then_size():
    recs = [
        TaskRecord(id=str(i), source="", level=lv, ops=["a"] * n, est_ms=ms)
        for i, (lv, n, ms) in enumerate([(3, 4, 1.0), (1, 1, 5.0), (2, 2, 9.0), (1, 1, 2.0)])
    ]
    assert [r.id for r in curriculum(recs)] == ["3", "1", "2", "0"]
    assert [r.id for r in curriculum(recs, levels=[1])] == ["3", "1"]


def test_guess_category():
    assert guess_category(["Conv2d", "relu"]) == "conv"
    assert guess_category(["matmul"]) == "matmul"
    assert guess_category(["cumsum"]) == "scan"
    assert guess_category([]) == ""
