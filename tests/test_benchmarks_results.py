"""The benchmarks' shared results writer (``benchmarks._results``) and the cache their generated solution sets
are written into on first use (``benchmarks.sandbox._generated``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from benchmarks import _results
from benchmarks.sandbox import _generated

SHA_A, SHA_B, SHA_C = "a" * 40, "b" * 40, "c" * 40


def test_a_result_records_where_it_came_from_and_lands_outside_the_tree(tmp_path, monkeypatch):
    monkeypatch.setattr(_results, "RUNS", tmp_path / "runs" / "benchmarks")
    smi = {"name": "NVIDIA H200", "driver_version": "580.1", "memory.total": "143771 MiB"}
    monkeypatch.setattr(_results, "nvidia_smi", lambda *fields: {f: smi[f] for f in fields})
    data = {"tokens_per_s": 12.5}
    path = _results.write_results("demo", data)
    assert path == tmp_path / "runs" / "benchmarks" / "demo.json"
    written = json.loads(path.read_text())
    assert written == data  # the provenance went into the caller's dict too: returned == written
    run = written["run"]
    assert run["command"] == shlex.join(sys.orig_argv) and run["cwd"]
    assert run["git_commit"] == _results.git_commit()
    env = run["env"]
    assert env["date_utc"] and env["python"] and "torch" in env["versions"] and "jax" in env["versions"]
    assert env["gpu"] == env["device"] == "NVIDIA H200" and env["driver"] == "580.1"
    monkeypatch.setattr(_results, "nvidia_smi", lambda *fields: None)  # no GPU: the CPU is the device
    assert _results.env_info()["gpu"] is None and _results.env_info()["device"].startswith("cpu")


def test_out_wins_and_an_existing_env_is_not_recorded_twice(tmp_path, monkeypatch):
    monkeypatch.setattr(_results, "RUNS", tmp_path / "default")
    data = {"env": {"gpu": "test"}, "rows": [1, 2]}
    out = tmp_path / "sub" / "r.json"
    assert _results.write_results("demo", data, out) == out and not (tmp_path / "default").exists()
    written = json.loads(out.read_text())
    assert "env" not in written["run"] and written["env"] == {"gpu": "test"}
    first = dict(written["run"])
    data["rows"].append(3)  # a progressive write keeps the first record
    _results.write_results("demo", data, out)
    assert json.loads(out.read_text())["run"] == first and json.loads(out.read_text())["rows"] == [1, 2, 3]
    with pytest.raises(ValueError, match="'run' is the results writer's"):
        _results.write_results("demo", {"run": "mine"}, out)


def test_the_default_location_is_ignored_by_git():
    ignored = [line.strip() for line in (_results.ROOT / ".gitignore").read_text().splitlines()]
    assert _results.RUNS.relative_to(_results.ROOT).parts[0] + "/" in ignored


def _repo(tmp_path: Path, head: str, refs: dict[str, str] | None = None, packed: str | None = None) -> Path:
    git = tmp_path / ".git"
    git.mkdir(parents=True)
    (git / "HEAD").write_text(head + "\n")
    for ref, sha in (refs or {}).items():
        (git / ref).parent.mkdir(parents=True, exist_ok=True)
        (git / ref).write_text(sha + "\n")
    if packed:
        (git / "packed-refs").write_text("# pack-refs with: peeled fully-peeled sorted\n" + packed)
    return tmp_path


def test_git_commit_reads_loose_packed_and_detached_heads(tmp_path):
    loose = _repo(tmp_path / "loose", "ref: refs/heads/main", {"refs/heads/main": SHA_A})
    assert _results.git_commit(loose) == SHA_A
    packed_refs = f"{SHA_C} refs/heads/x\n{SHA_B} refs/heads/dev\n"
    packed = _repo(tmp_path / "packed", "ref: refs/heads/dev", packed=packed_refs)
    assert _results.git_commit(packed) == SHA_B
    assert _results.git_commit(_repo(tmp_path / "detached", SHA_C)) == SHA_C
    assert _results.git_commit(tmp_path / "nowhere") is None


def test_git_commit_follows_a_worktree_to_the_common_refs(tmp_path):
    refs = {"refs/heads/main": SHA_A, "refs/heads/wt": SHA_B}
    main = _repo(tmp_path / "main", "ref: refs/heads/main", refs)
    private = main / ".git" / "worktrees" / "wt"
    private.mkdir(parents=True)
    (private / "HEAD").write_text("ref: refs/heads/wt\n")
    (private / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {private}\n")
    assert _results.git_commit(tree) == SHA_B


def test_a_generated_set_is_written_once_per_content(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHMARKS_CACHE_DIR", str(tmp_path / "cache"))
    files = {"problems/a.py": "A = 1\n", "solutions/a.py": "B = 2\n"}
    first = _generated.materialize("demo", files)
    assert first.parent == tmp_path / "cache" and (first / ".complete").exists()
    assert {p.relative_to(first).as_posix(): p.read_text() for p in first.rglob("*.py")} == files
    (first / "solutions" / "a.py").write_text("touched\n")  # a cache hit does not rewrite
    assert _generated.materialize("demo", dict(files)) == first
    assert (first / "solutions" / "a.py").read_text() == "touched\n"
    changed = _generated.materialize("demo", {**files, "solutions/a.py": "B = 3\n"})
    assert changed != first and (changed / "solutions" / "a.py").read_text() == "B = 3\n"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([first.name, changed.name])


def test_a_half_written_set_is_replaced_and_an_explicit_root_is_written_as_is(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHMARKS_CACHE_DIR", str(tmp_path / "cache"))
    files = {"solutions/a.py": "B = 2\n"}
    partial = tmp_path / "cache" / f"demo-{_generated.content_key(files)}"
    (partial / "solutions").mkdir(parents=True)
    (partial / "solutions" / "a.py").write_text("B = ")  # a run killed mid-write: no .complete marker
    assert _generated.materialize("demo", files) == partial
    assert (partial / "solutions" / "a.py").read_text() == "B = 2\n" and (partial / ".complete").exists()
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]  # no temporary left
    mine = _generated.materialize("demo", files, tmp_path / "mine")
    assert mine == tmp_path / "mine" and (mine / "solutions" / "a.py").read_text() == "B = 2\n"
