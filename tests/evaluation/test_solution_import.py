"""Importing released solution sets: field mappings, problem matching against a KernelBench checkout,
missing fields, duplicate ids, and the JSON / Parquet variants of one set."""

from __future__ import annotations

import json

import pytest

from research.evaluation import (
    FieldMap,
    KernelBenchNotFound,
    ProblemIndex,
    SolutionSetError,
    import_solutions,
)

from .conftest import MAPPING, RECORDS, make_checkout

CODE = "class ModelNew: pass\n"


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_real_checkout_is_indexed_and_matched(kernelbench_dir, tmp_path):
    index = ProblemIndex(kernelbench_dir)
    assert index.levels() == [1, 2, 3] and len(index) == 250
    rows = [
        {"lvl": "L1", "pid": "19", "kernel": CODE, "sp": "2.5x"},  # by level + id
        {"lvl": 2, "name": "Conv2d_ReLU_BiasAdd", "kernel": CODE},  # by name part, case-insensitive
        {"lvl": None, "name": "level3/1_MLP.py", "kernel": CODE},  # by path
        {"lvl": 1, "pid": 999, "kernel": CODE},  # no such problem
    ]
    fields = FieldMap(
        code="kernel",
        level="lvl",
        problem_id="pid",
        problem_name="name",
        claimed_speedup_eager="sp",
        default_source="paperX",
    )
    sset = import_solutions(_jsonl(tmp_path / "set.jsonl", rows), fields, index)
    got = [(s.level, s.problem.stem, s.source, s.claimed) for s in sset.solutions]
    assert got == [
        (1, "19_ReLU", "paperX", {"eager": 2.5}),
        (2, "1_Conv2D_ReLU_BiasAdd", "paperX", {}),
        (3, "1_MLP", "paperX", {}),
    ]
    assert sset.solutions[0].problem.path == kernelbench_dir / "level1" / "19_ReLU.py"
    assert len(sset.unmatched) == 1 and "level 1 id 999" in sset.unmatched[0]["reason"]
    assert sset.unmatched[0]["where"] == "set.jsonl record 3"


def test_reference_code_is_compared_with_the_checkout(kernelbench_dir, tmp_path):
    ref = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    rows = [
        {"level": 1, "problem_id": 19, "code": CODE, "ref": ref + "\n\n"},
        {
            "level": 1,
            "problem_id": 19,
            "code": CODE,
            "ref": ref.replace("batch_size = ", "batch_size = 1 + "),
        },
    ]
    sset = import_solutions(
        _jsonl(tmp_path / "s.jsonl", rows), FieldMap(reference="ref"), ProblemIndex(kernelbench_dir)
    )
    assert [s.reference_matches for s in sset.solutions] == [True, False]


def test_missing_checkout_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELBENCH_DIR", raising=False)
    with pytest.raises(KernelBenchNotFound, match="KERNELBENCH_DIR") as err:
        ProblemIndex(None)
    assert "\n" not in str(err.value)
    monkeypatch.setenv("KERNELBENCH_DIR", str(tmp_path / "nope"))
    with pytest.raises(
        KernelBenchNotFound, match=r"nope \(from \$KERNELBENCH_DIR\) is not a KernelBench checkout"
    ):
        ProblemIndex(None)
    monkeypatch.setenv("KERNELBENCH_DIR", str(make_checkout(tmp_path / "kb")))
    assert ProblemIndex(None).levels() == [1, 2]  # the variable is read when no path is given


def test_mapping_with_nested_fields(tmp_path):
    index = ProblemIndex(make_checkout(tmp_path / "kb"))
    sset = import_solutions(_jsonl(tmp_path / "set.jsonl", RECORDS), MAPPING, index)
    assert [(s.record_id, s.source, s.problem.key) for s in sset.solutions] == [
        ("a1", "sysA", "level1/1_relu"),
        ("a2", "sysA", "level1/1_relu"),
        ("b1", "sysB", "level2/3_scale"),
        ("b2", "sysB", "level2/3_scale"),
        ("b3", "sysB", "level2/3_scale"),
        ("b4", "sysB", "level2/4_zero"),
    ]
    assert sset.solutions[0].claimed == {"eager": 2.0, "compile": 1.5}
    assert sset.solutions[1].claimed == {"eager": 3.0}  # a null claim is no claim
    assert [u["record_id"] for u in sset.unmatched] == ["c1"]
    assert len({s.key for s in sset.solutions}) == 6 and sset.duplicates == []


def test_missing_field_names_the_record_and_the_field(tmp_path):
    index = ProblemIndex(make_checkout(tmp_path / "kb"))
    rows = [dict(RECORDS[0]), {k: v for k, v in RECORDS[2].items() if k != "src"}]
    with pytest.raises(
        SolutionSetError, match=r"set.jsonl record 1: the solution code field 'src' is missing"
    ):
        import_solutions(_jsonl(tmp_path / "set.jsonl", rows), MAPPING, index)
    rows = [dict(RECORDS[0]), {**RECORDS[2], "task": None, "meta": {}}]
    with pytest.raises(SolutionSetError, match=r"record 1: no problem named \(fields 'meta.level', 'task'"):
        import_solutions(_jsonl(tmp_path / "set.jsonl", rows), MAPPING, index)
    # a mapped optional field that no record has is a mapping mistake, not "no claims"
    bad = FieldMap(**{**MAPPING.__dict__, "claimed_speedup_eager": "speedup"})
    with pytest.raises(
        SolutionSetError, match=r"'claimed_speedup_eager' is mapped to 'speedup', which no record"
    ):
        import_solutions(_jsonl(tmp_path / "set.jsonl", RECORDS), bad, index)
    rows = [{**RECORDS[0], "claims": {"eager": "fast", "compile": 1.0}}]
    with pytest.raises(SolutionSetError, match=r"record 0: claimed speedup 'claims.eager' = 'fast'"):
        import_solutions(_jsonl(tmp_path / "set.jsonl", rows), MAPPING, index)


def test_duplicate_ids_are_reported_not_dropped(tmp_path):
    index = ProblemIndex(make_checkout(tmp_path / "kb"))
    rows = RECORDS[:3] + [{**RECORDS[1], "src": RELU_VARIANT}]  # "a2" twice, different code
    path = _jsonl(tmp_path / "set.jsonl", rows)
    kept = import_solutions(path, MAPPING, index)
    assert kept.duplicates == [
        {"record_id": "a2", "where": ["set.jsonl record 1", "set.jsonl record 3"], "policy": "keep"}
    ]
    assert [s.record_id for s in kept.solutions] == ["a1", "a2", "b1", "a2"]
    assert len({s.key for s in kept.solutions}) == 4  # both judged, under distinct keys
    first = import_solutions(path, MAPPING, index, on_duplicate="first")
    assert [s.record_id for s in first.solutions] == ["a1", "a2", "b1"] and first.duplicates[0][
        "policy"
    ] == "first"
    with pytest.raises(
        SolutionSetError, match=r"record 3: duplicate id 'a2' \(first at set.jsonl record 1\)"
    ):
        import_solutions(path, MAPPING, index, on_duplicate="error")


RELU_VARIANT = RECORDS[0]["src"].replace("BLOCK=128", "BLOCK=64")


def _summary(sset):
    return [(s.record_id, s.source, s.level, s.problem.stem, s.code, s.claimed) for s in sset.solutions]


def test_json_and_parquet_variants_import_the_same_set(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    index = ProblemIndex(make_checkout(tmp_path / "kb"))
    ref = _summary(import_solutions(_jsonl(tmp_path / "set.jsonl", RECORDS), MAPPING, index))
    (tmp_path / "list.json").write_text(json.dumps({"solutions": RECORDS}))
    assert _summary(import_solutions(tmp_path / "list.json", MAPPING, index)) == ref
    # per-task JSON: {id: record}; the id comes from the key when the mapping has no id field
    (tmp_path / "by_id.json").write_text(
        json.dumps({r["uid"]: {k: v for k, v in r.items() if k != "uid"} for r in RECORDS})
    )
    no_id = FieldMap(**{**MAPPING.__dict__, "id": None})
    assert _summary(import_solutions(tmp_path / "by_id.json", no_id, index)) == ref
    # a folder of per-task JSON files: the file stem is the id
    folder = tmp_path / "tasks"
    folder.mkdir()
    for r in RECORDS:
        (folder / f"{r['uid']}.json").write_text(json.dumps({k: v for k, v in r.items() if k != "uid"}))
    assert sorted(_summary(import_solutions(folder, no_id, index)), key=str) == sorted(ref, key=str)
    # Parquet: flat columns (nested structs with mixed types do not survive Arrow), claims as strings
    flat = [
        {
            "uid": r["uid"],
            "system": r["system"],
            "level": str(r["meta"]["level"]),
            "task": r["task"],
            "src": r["src"],
            "eager": str(r["claims"].get("eager")),
            "compile": r["claims"].get("compile"),
        }
        for r in RECORDS
    ]
    for row in flat:
        row["compile"] = None if row["compile"] is None else str(row["compile"])
    pq.write_table(pa.Table.from_pylist(flat), tmp_path / "set.parquet")
    fields = FieldMap(
        code="src",
        level="level",
        problem_id=None,
        problem_name="task",
        id="uid",
        source="system",
        claimed_speedup_eager="eager",
        claimed_speedup_compile="compile",
    )
    assert _summary(import_solutions(tmp_path / "set.parquet", fields, index)) == ref


def test_unreadable_sets_say_why(tmp_path):
    index = ProblemIndex(make_checkout(tmp_path / "kb"))
    (tmp_path / "bad.jsonl").write_text(json.dumps(RECORDS[0]) + "\n{not json\n")
    with pytest.raises(SolutionSetError, match="bad.jsonl line 2: not JSON"):
        import_solutions(tmp_path / "bad.jsonl", MAPPING, index)
    with pytest.raises(SolutionSetError, match="does not exist"):
        import_solutions(tmp_path / "nope.jsonl", MAPPING, index)
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(SolutionSetError, match="unsupported file type '.csv'"):
        import_solutions(tmp_path / "x.csv", MAPPING, index)
