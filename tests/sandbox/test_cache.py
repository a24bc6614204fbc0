"""Baseline cache: keyed on everything a timing depends on, never stale, atomic, corrupt files rebuilt."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kernels_env.host.cache import JsonCache
from kernels_env.judge.timing.baselines import baseline_key, cached_baselines
from kernels_env.rules.config import JudgeConfig
from kernels_env.rules.protocols import JudgeSettings, resolve

ENV = {
    "device": "cuda",
    "gpu": "NVIDIA H200",
    "driver": "580.1",
    "torch": "2.11.0",
    "cuda_runtime": "13.0",
    "triton": "3.6.0",
    "cpu": "x",
}
SETTINGS = JudgeSettings.from_dict(resolve(JudgeConfig(), "cuda"))
SPEC = [{"shape": [16, 1024], "dtype": "float32"}]


def key(**changes):
    args = {
        "reference_source": "class Model: pass\n",
        "input_spec": SPEC,
        "init_spec": [],
        "env": ENV,
        "mode": "eager",
        "settings": SETTINGS,
    }
    args.update(changes)
    return baseline_key(**args)


@pytest.mark.parametrize(
    "change",
    [
        {"reference_source": "class Model: pass  # edited\n"},
        {"env": {**ENV, "torch": "2.12.0"}},
        {"env": {**ENV, "gpu": "NVIDIA H100 80GB HBM3"}},
        {"env": {**ENV, "driver": "590.0"}},
        {"mode": "compile"},
        {"input_spec": [{"shape": [16, 2048], "dtype": "float32"}]},
        {"init_spec": ["8"]},
        {"settings": dataclasses.replace(SETTINGS, allow_tf32=not SETTINGS.allow_tf32)},
        {"settings": dataclasses.replace(SETTINGS, mode="eval" if SETTINGS.mode == "train" else "train")},
        {"settings": dataclasses.replace(SETTINGS, timing={**SETTINGS.timing, "min_iters": 50})},
    ],
)
def test_every_dependency_changes_the_key(tmp_path, change):
    cache = JsonCache(tmp_path)
    cache.put(key(), {"median_ms": 1.0})
    assert cache.get(key()) == {"median_ms": 1.0}
    assert key(**change) != key()
    assert cache.get(key(**change)) is None  # a miss: never a stale entry


def test_corrupt_or_foreign_entries_are_misses_and_get_rebuilt(tmp_path):
    cache = JsonCache(tmp_path)
    path = cache.put(key(), {"median_ms": 1.0})
    path.write_text('{"key": {"trunc')  # a torn write from some other tool
    assert cache.get(key()) is None
    path.write_text(
        json.dumps({"key": key(mode="compile"), "value": {"median_ms": 9.0}})
    )  # collision/old format
    assert cache.get(key()) is None
    calls = []

    def compute(mode):
        calls.append(mode)
        return {"median_ms": 2.0}

    out = cached_baselines(cache, {"eager": key()}, compute)
    assert out["eager"] == {"median_ms": 2.0, "cached": False} and calls == ["eager"]
    out = cached_baselines(cache, {"eager": key()}, compute)
    assert out["eager"] == {"median_ms": 2.0, "cached": True} and calls == ["eager"]
    assert not list(tmp_path.rglob(".tmp-*")), "no temporary files left behind"


def test_failed_measurements_are_not_cached(tmp_path):
    cache = JsonCache(tmp_path)
    out = cached_baselines(cache, {"compile": key(mode="compile")}, lambda m: {"error": "inductor failed"})
    assert out["compile"]["error"] and cache.get(key(mode="compile")) is None


def test_interrupted_write_leaves_the_old_entry(tmp_path, monkeypatch):
    cache = JsonCache(tmp_path)
    cache.put(key(), {"median_ms": 1.0})

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("kernels_env.host.cache.os.replace", boom)
    with pytest.raises(KeyboardInterrupt):
        cache.put(key(), {"median_ms": 5.0})
    monkeypatch.undo()
    assert cache.get(key()) == {"median_ms": 1.0}
    assert not list(tmp_path.rglob(".tmp-*"))
