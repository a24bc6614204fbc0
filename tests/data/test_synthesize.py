"""The pipeline: exact mix quotas, resumability (interrupt -> rerun -> same result, no duplicates),
reproducibility, dedup, decontamination with the nearest eval problem, split hold-out, CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from research.data.candidates import make_candidate
from research.data.checks import check_task
from research.data.config import FilterConfig, MixConfig, SynthesisConfig
from research.data.gpu_filter import SandboxTimer
from research.data.ops import LIBRARY, Reject
from research.data.records import read_jsonl
from research.data.synthesize import quotas, synthesize

ROOT = Path(__file__).resolve().parents[2]


def small_cfg(out: Path, **kw) -> SynthesisConfig:
    filters = FilterConfig(compile_backend="none", inductor_fraction=0.0, real_size_budget_mflop=0.0)
    return SynthesisConfig(num_tasks=10, out_dir=str(out), workers=2, progress=False, filters=filters, **kw)


def test_quotas_are_the_paper_mix_exactly():
    cfg = SynthesisConfig(num_tasks=6000)
    assert quotas(cfg) == {"1": 204, "2": 5028, "3": 456, "4": 168, "5": 72, "m": 72}
    for n in (1, 7, 99):
        assert sum(quotas(dataclasses.replace(cfg, num_tasks=n)).values()) == n


def test_candidates_are_reproducible_and_seeded():
    cfg = SynthesisConfig()
    other = dataclasses.replace(cfg, seed=1)
    same = diff = 0
    for j in range(30):
        try:
            a, b = make_candidate(cfg, "2", j), make_candidate(cfg, "2", j)
        except Reject:
            continue
        assert a.record == b.record and a.payload == b.payload
        same += 1
        try:
            diff += make_candidate(other, "2", j).record.source != a.record.source
        except Reject:
            diff += 1
    assert same > 10  # enough candidates build for the comparison to mean something
    assert diff == same  # another seed changes every candidate


def _planted_eval_dir(tmp_path: Path, cfg: SynthesisConfig) -> tuple[Path, str]:
    """An eval dir holding a lightly edited copy of the first bucket-2 candidate (a contamination plant)."""
    for j in range(50):
        try:
            cand = make_candidate(cfg, "2", j)
            break
        except Reject:
            continue
    d = tmp_path / "evalset" / "level2"
    d.mkdir(parents=True)
    edited = re.sub(r"\bx\b", "inp", cand.record.source)
    (d / "1_Planted.py").write_text("# copied from a training task, variable renamed\n" + edited)
    return tmp_path / "evalset", cand.record.id


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("synth")
    probe = small_cfg(tmp / "probe")
    eval_dir, planted = _planted_eval_dir(tmp, probe)
    filters = dataclasses.replace(probe.filters, decontam_dir=str(eval_dir))
    cfg = dataclasses.replace(small_cfg(tmp / "a"), filters=filters)
    manifest = synthesize(cfg)
    return cfg, manifest, planted, tmp


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_dataset_files_and_manifest(full_run):
    cfg, manifest, _, _ = full_run
    out = Path(cfg.out_dir)
    recs = read_jsonl(out / "tasks.jsonl")
    assert len(recs) == cfg.num_tasks == manifest["num_tasks"]
    assert len({r.id for r in recs}) == len(recs) and len({r.signature for r in recs}) == len(recs)
    files = sorted((out / "tasks").glob("*.py"))
    assert len(files) == len(recs)
    by_name = {r.name: r for r in recs}
    for f in files:
        assert f.read_text() == by_name[f.stem].source
    counts = manifest["counts"]
    assert sum(counts["num_ops"].values()) == len(recs)
    assert {str(k): v for k, v in counts["num_ops"].items() if v} == {"2": 9, "3": 1}
    assert manifest["candidates"] == len(recs) + sum(manifest["drop_reasons"].values())
    assert (out / "summary.png").stat().st_size > 10_000
    for r in recs:
        assert r.origin == "synthesized" and r.est_ms and 1.0 <= r.est_ms <= 100.0
        cand = make_candidate(cfg, r.meta["bucket"], r.meta["index"])
        assert cand.record.source == r.source  # the stream regenerates every kept task exactly
        assert (
            r.meta["checked_output_shape"] == cand.payload["expect_shape"]
        )  # the worker saw the declared shape
        assert len(r.output_shape) == len(cand.payload["expect_shape"])
        assert r.input_spec and all(isinstance(d, int) for s in r.input_spec for d in s["shape"])


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_decontamination_drops_the_plant_and_names_the_eval_problem(full_run):
    _, manifest, planted, _ = full_run
    dropped = {d["id"]: d for d in manifest["decontamination"]["dropped"]}
    assert planted in dropped, manifest["drop_reasons"]
    assert "1_Planted.py" in dropped[planted]["detail"]
    assert manifest["decontamination"]["ran"] and manifest["decontamination"]["eval_problems"] == 1


@pytest.mark.slow  # ~16 s on 2 loaded cores (tests/_tiers.py)
def test_interrupt_then_resume_gives_the_same_dataset(full_run):
    cfg, _, _, tmp = full_run
    other = dataclasses.replace(cfg, out_dir=str(tmp / "b"))
    assert synthesize(other, stop_after=6) == {"interrupted": True, "commits": 6}
    log = Path(other.out_dir) / "candidates.jsonl"
    log.write_text(log.read_text() + '{"bucket": "2", "j": 99, "sta')  # a write cut off by the interruption
    synthesize(other)
    a = [(r.id, r.source) for r in read_jsonl(Path(cfg.out_dir) / "tasks.jsonl")]
    b = [(r.id, r.source) for r in read_jsonl(Path(other.out_dir) / "tasks.jsonl")]
    assert a == b
    keys = [(e["bucket"], e["j"]) for e in map(json.loads, log.read_text().splitlines())]
    assert len(keys) == len(set(keys))  # nothing committed twice
    again = synthesize(other)  # a finished run resumes to the same export
    assert again["num_tasks"] == cfg.num_tasks


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_resume_with_another_config_is_refused(full_run):
    cfg, _, _, _ = full_run
    with pytest.raises(ValueError, match="different config"):
        synthesize(dataclasses.replace(cfg, seed=3))
    with pytest.raises(FileExistsError, match="resume=true"):
        synthesize(dataclasses.replace(cfg, resume=False))


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_split_holds_out_whole_categories(full_run):
    cfg, _, _, _ = full_run
    held = set(cfg.split.test_categories)
    for r in read_jsonl(Path(cfg.out_dir) / "tasks.jsonl"):
        assert (r.split == "test") == bool(held & {LIBRARY[o].category for o in r.ops})
        assert r.split in ("train", "val", "test")


class FakeSandbox:
    """Stands in for kernels_env.client.SandboxClient: same ``baseline`` method and result shape."""

    environment = {"gpu": "FakeGPU"}

    def __init__(self):
        self.seen = []

    def baseline(self, reference, judge=None):
        self.seen.append(reference)
        ms = 0.5 if len(self.seen) == 1 else 5.0  # the first task falls below the 1 ms window
        return {
            "problem": "p",
            "device": "cuda",
            "baselines": {"eager": {"median_ms": ms}},
            "comparable": True,
        }


@pytest.mark.slow  # ~12 s on 2 loaded cores (tests/_tiers.py)
def test_duplicates_are_dropped_and_gpu_window_applies(tmp_path):
    keep = {"relu"}
    mix = MixConfig(
        op_count_weights=[1.0, 0, 0, 0, 0],
        module_weight=0.0,
        dtype_weights={"float32": 1.0},
        exclude_ops=[n for n in LIBRARY if n not in keep],
    )
    cfg = dataclasses.replace(small_cfg(tmp_path / "d"), num_tasks=4, mix=mix)
    sandbox = FakeSandbox()
    manifest = synthesize(cfg, timer=SandboxTimer(sandbox))
    recs = read_jsonl(tmp_path / "d" / "tasks.jsonl")
    assert len({r.signature for r in recs}) == len(recs) == 4
    assert manifest["drop_reasons"].get("duplicate", 0) > 0
    assert manifest["drop_reasons"].get("runtime_window") == 1
    assert all(r.baselines == {"FakeGPU": {"eager_ms": 5.0}} for r in recs)
    assert manifest["runtime"]["gpus"] == ["FakeGPU"]


@pytest.mark.integration  # the entry point in a subprocess
def test_cli_entry_point(tmp_path):
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "experiments.synthesize",
        "num_tasks=3",
        f"out_dir={out}",
        "workers=1",
        "progress=false",
        "filters.compile_backend=none",
        "filters.inductor_fraction=0.0",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(read_jsonl(out / "tasks.jsonl")) == 3
    assert "3 tasks from" in proc.stdout


@pytest.mark.slow
def test_every_task_of_a_dataset_executes_and_matches_its_shapes(tmp_path):
    """Every task of a 400-task dataset (default filters): re-checked at its check size with its declared
    shape, and run at its real sizes on the meta device with its declared inputs and output."""
    import torch

    from research.data.checks import load_module

    cfg = SynthesisConfig(num_tasks=400, out_dir=str(tmp_path / "all"), workers=2, progress=False)
    synthesize(cfg)
    recs = read_jsonl(tmp_path / "all" / "tasks.jsonl")
    assert len(recs) == 400
    for r in recs:
        cand = make_candidate(cfg, r.meta["bucket"], r.meta["index"])
        assert cand.record.source == r.source
        res = check_task(dict(cand.payload, compile_backend="none", also_inductor=False))
        assert res["ok"], (r.id, res)
        assert res["out_shape"] == cand.payload["expect_shape"]
        mod = load_module(r.source)
        with torch.device("meta"):
            inputs = mod.get_inputs()
            out = mod.Model(*mod.get_init_inputs())(*inputs)
        assert list(out.shape) == r.output_shape and [list(x.shape) for x in inputs] == [
            s["shape"] for s in r.input_spec
        ]
