"""Aggregating a Hydra multirun directory: rows ablation x seed from a real multirun of a stand-in app; a
point that crashed and a point that never ran reported (not dropped), curves read from the metrics files;
and the launcher configs (SLURM through submitit, basic locally) compose without a cluster."""

from __future__ import annotations

import shutil

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate

from research.evaluation import ablation_table, collect, curves, format_ablations

from .conftest import ROOT
from .multirun_app import KEYS, value


def test_rows_are_ablation_x_seed_with_the_failed_point_reported(multirun, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(multirun, sweep)
    never = next(d for d in sweep.iterdir() if d.name.endswith("ablation=full,seed=1"))
    shutil.rmtree(never)  # a SLURM job that never started
    table = ablation_table(collect(sweep), tuple(KEYS))
    got = {(r["ablation"], r["seed"]): r["status"] for r in table["rows"]}
    assert got == {
        ("full", "0"): "ok",
        ("full", "1"): "failed",
        ("no_rft", "0"): "ok",
        ("no_rft", "1"): "failed",
    }
    reasons = {(r["ablation"], r["seed"]): r["reason"] for r in table["failed"]}
    assert reasons == {
        ("full", "1"): "never ran (no job directory)",
        ("no_rft", "1"): "stage ppo did not finish",
    }
    # final metrics: the last row of each point's ppo metrics.jsonl (gain 1.0 full, 0.5 no_rft; 4 steps)
    for r in table["rows"]:
        if r["status"] == "ok":
            gain = 1.0 if r["ablation"] == "full" else 0.5
            assert [r[k] for k in KEYS] == [value(gain, int(r["seed"]), 4, i) for i in range(len(KEYS))]
    assert table["ablations"]["no_rft"]["failed"] == 1 and table["ablations"]["no_rft"]["points"] == 2
    assert table["ablations"]["full"]["reward_mean"] == {"mean": value(1.0, 0, 4, 0), "std": 0.0}
    text = format_ablations(table)
    assert (
        "FAILED no_rft seed 1: stage ppo did not finish" in text and "FAILED full seed 1: never ran" in text
    )


def test_nested_eval_metrics_are_flattened(multirun):
    table = ablation_table(collect(multirun))
    assert "eval/test/pass_rate" in table["metrics"]
    ok = [r for r in table["rows"] if r["status"] == "ok"]
    assert {r["ablation"]: r["eval/test/pass_rate"] for r in ok} == {"full": 1.0, "no_rft": 0.5}


def test_a_crash_before_pipeline_json_and_a_submitit_log(multirun, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.copytree(multirun, sweep)
    job = next(d for d in sweep.iterdir() if d.name.endswith("ablation=full,seed=0"))
    (job / "pipeline.json").unlink()
    num = job.name.split("_", 1)[0]
    logs = sweep / ".submitit" / f"4242_{num}"
    logs.mkdir(parents=True)
    (logs / f"4242_{num}_0_log.err").write_text(
        "Traceback (most recent call last):\n  ...\ntorch.OutOfMemoryError: CUDA out of memory\n"
    )
    point = next(p for p in collect(sweep) if p.dir == job)
    assert point.status == "failed"
    err = f"4242_{num}_0_log.err: torch.OutOfMemoryError: CUDA out of memory"
    assert point.reason == f"no final metrics (no pipeline.json); {err}"


def test_curves_come_from_the_metrics_files(multirun):
    data = curves(collect(multirun))
    assert set(data) == {
        "reward",
        "faster_than_compile",
        "entropy",
        "explained_variance",
        "clip_fraction",
        "response_length",
    }
    assert data["reward"]["full seed 1"] == [(s, value(1.0, 1, s, 0)) for s in range(1, 5)]
    assert data["clip_fraction"]["no_rft seed 0"] == [(s, value(0.5, 0, s, 4)) for s in range(1, 5)]
    assert "no_rft seed 1" not in data["reward"]  # crashed before its ppo metrics


def test_not_a_multirun_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Hydra job directories"):
        collect(tmp_path)


@pytest.mark.parametrize("root", ["solutions", "config", "agent"])
def test_slurm_launcher_composes_without_a_cluster(root):
    from experiments._schemas import register

    register(root)  # the groups' schemas (sandbox=auto is SandboxConfig), as the entry point does
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            root, ["hydra/launcher=slurm", "hydra.launcher.partition=gpu"], return_hydra_config=True
        )
        local = compose(root, ["hydra/launcher=local"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.partition == "gpu" and launcher.gpus_per_node == 1
    assert local.hydra.launcher._target_.endswith("BasicLauncher")
    HydraConfig.instance().set_config(cfg)
    obj = instantiate(launcher)  # the plugin's launcher object, parameters resolved; submits nothing
    assert obj.params["submitit_folder"].endswith("/.submitit/%j") and obj.params["mem_gb"] == 120
