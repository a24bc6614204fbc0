"""Task sources of the agent loop: a problems directory (splits from folder names), a research.data dataset
(a synthesis output directory, JSONL or Parquet with a column map) written as problem files per split (CPU
mode: at the records' proxy sizes), toy tasks per split; and their one-line errors."""

from __future__ import annotations

import json
import re

import pytest

from research.agent import AgentConfigError, TasksConfig, find_tasks, load_tasks
from research.data import SplitConfig, SynthesisConfig, TaskRecord, make_candidate, write_jsonl
from research.data.ops import Reject

RELU = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def _no_device():
    raise AssertionError("the sandbox's device was asked for although no record has CPU sizes")


def _gpu():
    return "cuda"  # a GPU sandbox: problems at real size


def _synthesized(n_per_bucket=3, buckets=("1", "2")):
    """Real synthesized records (research.data's composer, no worker processes): attention tasks held out
    for test, the rest train; with each candidate's check payload (its proxy-size output shape)."""
    cfg = SynthesisConfig(split=SplitConfig(test_categories=["attention"], val_fraction=0.0))
    out = []
    for b in buckets:
        kept = 0
        for j in range(200):
            try:
                cand = make_candidate(cfg, b, j)
            except Reject:
                continue
            out.append(cand)
            kept += 1
            if kept == n_per_bucket:
                break
    return out


def _synthesis_dir(tmp_path, cands):
    """The layout ``experiments.synthesize`` exports: tasks.jsonl and tasks/<name>.py."""
    d = tmp_path / "ops"
    (d / "tasks").mkdir(parents=True)
    for c in cands:
        (d / "tasks" / f"{c.record.name}.py").write_text(c.record.source)
    write_jsonl(d / "tasks.jsonl", sorted((c.record for c in cands), key=lambda r: r.id))
    (d / "manifest.json").write_text("{}")
    return d


def test_synthesis_output_gives_tasks_per_split_with_problem_files(tmp_path):
    cands = _synthesized()
    recs = {c.record.id: c.record for c in cands}
    assert {r.split for r in recs.values()} == {"train", "test"}  # the fixture covers both
    out = tmp_path / "run"
    tasks = load_tasks(TasksConfig(source="data", path=str(_synthesis_dir(tmp_path, cands))), out, _gpu)
    assert len(tasks) == len(recs)
    assert [t.split for t in tasks] == sorted((t.split for t in tasks), key=["train", "test"].index)
    for t in tasks:
        rec = recs[t.meta["record_id"]]
        assert t.path == out / "problems" / rec.split / f"{rec.name}.py" and t.id == f"{rec.split}/{rec.name}"
        assert t.path.read_text() == rec.source and t.meta["sizes"] == "real"  # GPU: real size, unchanged
        assert t.split == rec.split and t.level == str(rec.level) and t.meta["category"] == rec.category
    # per split, in record-id order
    test_only = load_tasks(TasksConfig(source="data", path=str(tmp_path / "ops"), split="test"), out, _gpu)
    assert [t.meta["record_id"] for t in test_only] == sorted(i for i, r in recs.items() if r.split == "test")
    first = load_tasks(TasksConfig(source="data", path=str(tmp_path / "ops"), limit=1), out, _gpu)
    assert [t.meta["record_id"] for t in first] == [
        min(i for i, r in recs.items() if r.split == s) for s in ("train", "test")
    ]
    # the written problems load back as a directory source with the same ids and splits
    back = find_tasks(TasksConfig(problems_dir=str(out / "problems")))
    assert sorted((t.id, t.split, t.path.read_text()) for t in back) == sorted(
        (t.id, t.split, t.path.read_text()) for t in tasks
    )


def _proxy_reference(source: str, sizes: dict[str, int]) -> str:
    """The source at proxy sizes, written independently of research.data: each size constant's line."""
    for name, value in sizes.items():
        source, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", source, flags=re.M)
        assert n == 1, name
    return source


def test_cpu_mode_writes_records_at_their_proxy_sizes(tmp_path):
    torch = pytest.importorskip("torch")
    cands = [c for c in _synthesized(n_per_bucket=2) if c.record.meta["check_mode"] == "proxy"]
    assert cands and all(c.record.proxy_sizes for c in cands)
    tasks = load_tasks(
        TasksConfig(source="data", path=str(_synthesis_dir(tmp_path, cands))), tmp_path, lambda: "cpu"
    )
    by_id = {c.record.id: c for c in cands}
    for t in tasks:
        cand = by_id[t.meta["record_id"]]
        text = t.path.read_text()
        assert text == _proxy_reference(cand.record.source, cand.record.proxy_sizes) != cand.record.source
        assert t.meta["sizes"] == "proxy"
    # the written problem runs at the size the synthesis checked it on CPU (the composer's own shapes)
    t = tasks[0]
    cand = by_id[t.meta["record_id"]]
    ns: dict = {}
    exec(compile(t.path.read_text(), str(t.path), "exec"), ns)
    torch.manual_seed(0)
    with torch.no_grad():
        y = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
    assert list(y.shape) == cand.payload["expect_shape"]


def _record_rows():
    src2 = RELU.replace("torch.relu(x)", "torch.tanh(x)")
    return [
        {"task_name": "relu a/b", "code": RELU, "part": "train", "difficulty": 1, "ops": ["relu"]},
        {"task_name": "Relu_a_b", "code": RELU, "part": "test", "difficulty": 2, "ops": ["relu"]},
        {"task_name": "relu_a_b", "code": src2, "part": "test", "difficulty": None, "ops": ["tanh"]},
    ]


def test_parquet_dataset_with_a_column_map(tmp_path):
    pa = pytest.importorskip("pyarrow")  # pinned in requirements.txt
    import pyarrow.parquet as pq

    path = tmp_path / "ops.parquet"
    pq.write_table(pa.Table.from_pylist(_record_rows()), path)
    columns = {"id": "task_name", "source": "code", "split": "part", "level": "difficulty"}
    tasks = load_tasks(
        TasksConfig(source="data", path=str(path), columns=columns), tmp_path / "run", _no_device
    )
    # names made filesystem-safe, unique per split (case-insensitively) in id order: "Relu_a_b" < "relu_a_b"
    assert [(t.id, t.level) for t in tasks] == [
        ("train/relu_a_b", "1"),
        ("test/Relu_a_b", "2"),
        ("test/relu_a_b-2", "all"),
    ]
    rows = _record_rows()
    assert [t.path.read_text() for t in tasks] == [RELU, RELU, rows[2]["code"]] and rows[2]["code"] != RELU
    assert tasks[2].meta["record"].ops == ["tanh"] and tasks[2].meta["category"] == "elementwise"
    with pytest.raises(AgentConfigError, match="tasks.path=.*ops.parquet: a row has no column 'name'"):
        load_tasks(
            TasksConfig(source="data", path=str(path), columns={"source": "code", "id": "name"}),
            tmp_path / "run",
            _no_device,
        )


def test_records_round_trip_through_jsonl_and_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    cands = _synthesized(n_per_bucket=2)
    synth = _synthesis_dir(tmp_path, cands)

    def records(path):
        tasks = load_tasks(TasksConfig(source="data", path=str(path)), tmp_path / "run", _gpu)
        return [t.meta["record"].to_dict() for t in tasks]

    exact = records(synth)
    assert exact == [
        c.record.to_dict() for c in sorted(cands, key=lambda c: (c.record.split != "train", c.record.id))
    ]
    assert records(synth / "tasks.jsonl") == exact  # our JSONL read as a dataset file: every field back
    rows = [{k: v for k, v in r.to_dict().items() if k != "baselines"} for r in (c.record for c in cands)]
    # the same records as Parquet (less ``baselines``: an empty struct has no Parquet type)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ops.parquet")
    assert records(tmp_path / "ops.parquet") == exact


def test_directory_source_splits_from_folder_names(tmp_path):
    root = tmp_path / "problems"
    for rel in ("train/level1/1_a.py", "test/level2/2_b.py", "test/level2/3_c.py", "level3/4_d.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(RELU)
    got = [(t.id, t.split, t.level) for t in find_tasks(TasksConfig(problems_dir=str(root)))]
    assert got == [
        ("level3/4_d", "train", "3"),  # no split folder: split_name (train)
        ("train/level1/1_a", "train", "1"),
        ("test/level2/2_b", "test", "2"),
        ("test/level2/3_c", "test", "2"),
    ]
    got = find_tasks(TasksConfig(problems_dir=str(root), split_name="val", limit=1))
    assert [(t.id, t.split) for t in got] == [
        ("train/level1/1_a", "train"),
        ("level3/4_d", "val"),
        ("test/level2/2_b", "test"),
    ]  # train, val, test
    assert {t.split for t in find_tasks(TasksConfig(problems_dir=str(root / "test")))} == {"test"}
    with pytest.raises(
        AgentConfigError, match=r"tasks.split=val: tasks.problems_dir=.* no task of split 'val'"
    ):
        find_tasks(TasksConfig(problems_dir=str(root), split="val"))


def test_toy_tasks_carry_their_split(tmp_path):
    cfg = TasksConfig(source="toy", limit=1, split="test,heldout_category")
    tasks = load_tasks(cfg, tmp_path, _gpu)
    assert [(t.split, t.level) for t in tasks] == [("test", "test"), ("heldout_category", "heldout")]
    assert all(t.meta["category"] == t.meta["toy_task"].categories[0] for t in tasks)
    assert "normalization" in tasks[1].meta["toy_task"].categories  # the held-out category's tasks
    with pytest.raises(AgentConfigError, match="tasks.split: toy tasks have splits"):
        load_tasks(TasksConfig(source="toy", limit=1, split="val"), tmp_path, _gpu)


def _one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


def test_data_source_errors_are_one_line(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(AgentConfigError, match="tasks.source=data needs tasks.path"):
        TasksConfig(source="data")
    with pytest.raises(FileNotFoundError, match="tasks.path=.*nope.jsonl: no such file") as e:
        load_tasks(TasksConfig(source="data", path=str(tmp_path / "nope.jsonl")), out, _no_device)
    _one_line(e)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(AgentConfigError, match="tasks.path=.*empty.jsonl: no task records") as e:
        load_tasks(TasksConfig(source="data", path=str(empty)), out, _no_device)
    _one_line(e)
    data = tmp_path / "d.jsonl"
    write_jsonl(data, [TaskRecord(id="a", source=RELU, split="train")])
    with pytest.raises(
        AgentConfigError, match=r"tasks.split=val,test: .* no task of split 'val' .*\['train'\]"
    ):
        load_tasks(TasksConfig(source="data", path=str(data), split="val,test"), out, _no_device)
    no_source = tmp_path / "ns.jsonl"
    no_source.write_text(json.dumps({"id": "a", "split": "train"}) + "\n")
    with pytest.raises(AgentConfigError, match="tasks.path=.*ns.jsonl: .*no source column") as e:
        load_tasks(TasksConfig(source="data", path=str(no_source)), out, _no_device)
    _one_line(e)
    synth = tmp_path / "synth"
    synth.mkdir()
    (synth / "tasks.jsonl").write_text(json.dumps({"id": "a", "split": "train"}) + "\n")
    with pytest.raises(AgentConfigError, match="tasks.path=.*synth: a task record needs 'id' and 'source'"):
        load_tasks(TasksConfig(source="data", path=str(synth)), out, _no_device)
    (synth / "tasks.jsonl").unlink()
    (synth / "candidates.jsonl").write_text("")
    with pytest.raises(
        FileNotFoundError, match="tasks.path=.*synth: no tasks.jsonl: synthesis has not finished"
    ):
        load_tasks(TasksConfig(source="data", path=str(synth)), out, _no_device)
    with pytest.raises(AgentConfigError, match="^tasks.columns: 'sauce' is no task record field"):
        load_tasks(TasksConfig(source="data", path=str(data), columns={"sauce": "code"}), out, _no_device)
    bad = tmp_path / "bad.jsonl"
    write_jsonl(bad, [TaskRecord(id="a", source=RELU, proxy_sizes={"batch": 2})])
    with pytest.raises(AgentConfigError, match="record a: proxy_sizes do not apply"):
        load_tasks(TasksConfig(source="data", path=str(bad)), out, lambda: "cpu")
    assert load_tasks(TasksConfig(source="data", path=str(bad)), out, _gpu)[0].path.read_text() == RELU


def test_missing_dataset_through_the_entry_point_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from tests.hydra_mains import run_main

    missing = tmp_path / "none.parquet"
    argv = [
        "tasks=data",
        f"tasks.path={missing}",
        "sandbox=cpu",
        f"out_dir={tmp_path / 'out'}",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    assert run_main("agent", argv, monkeypatch) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: tasks.path={missing}: no such file or directory"]


def test_names_are_stable_across_runs(tmp_path):
    data = tmp_path / "d.jsonl"
    recs = [TaskRecord(id=i, source=RELU, name=n) for i, n in (("b", "../x"), ("a", ".x"), ("c", ""))]
    write_jsonl(data, recs)
    runs = [
        [t.id for t in load_tasks(TasksConfig(source="data", path=str(data)), tmp_path / "r", _no_device)]
        for _ in range(2)
    ]
    assert runs[0] == runs[1] == ["train/x", "train/x-2", "train/c"]
