"""The staged pipeline with its learners on mesh (data, fsdp) = (2, 4) of 8 fake CPU devices: every stage
runs end to end with parameters and Adam moments sharded by models.DEFAULT_RULES, the warm-up's metrics
equal the one-device run's from the same pretrained policy, the final actor restores onto one device and
another mesh, and bad mesh sizes fail in one line naming the field. Measurements come from
tests/rl/pipeline_mesh_check.py (see conftest.py).

1e-5 absolute, as test_sharded.py: fp32 on both sides, only the reduction order differs (collectives vs one
device), and the metrics compared are of order 1 (``warmup_grad_norm``); the rollouts of step 2 sample
from the updated weights of both runs and still draw the same tokens (any flip would show as a diff of
order 1 in reward or length metrics, far above 1e-5)."""

from __future__ import annotations

import pytest

FSDP_SPEC = "P(None, 'tensor', None, 'fsdp')"


@pytest.fixture(scope="module")
def report(pipeline_mesh_report):
    return pipeline_mesh_report


def test_every_stage_runs_sharded(report):
    assert report["devices"] == 8
    assert report["stages"] == ["ppo", "pretrain", "rft", "value", "warmup"]
    pretrain, *learners = report["seen"]
    assert pretrain == {"stage": "pretrain", "q_spec": FSDP_SPEC}
    # warm-up, RFT, value and PPO (the lenient filter makes RFT train)
    assert report["rft_steps"] > 0, report["rft_reason"]  # RFT trained, so its learner ran on the mesh
    assert len(learners) == 4
    for seen in learners:
        mesh = {"data": 2, "fsdp": 4, "tensor": 1}
        assert seen == {"mesh": mesh, "q_spec": FSDP_SPEC, "opt_q_spec": FSDP_SPEC}
    assert report["seen_single"] == [{"mesh": None, "q_spec": "one device", "opt_q_spec": "one device"}]


def test_warmup_metrics_equal_one_device(report):
    assert report["warmup_steps"] == [2, 2]
    assert report["warmup_metric_keys"] > 20
    assert report["warmup_grad_norm"] > 1e-2
    assert report["warmup_metric_diff"]["1"] < 1e-5, report["warmup_worst"]
    assert report["warmup_metric_diff"]["2"] < 1e-5, report["warmup_worst"]


def test_final_actor_restores_on_one_device_and_another_mesh(report):
    assert report["restore_diff"] == 0.0  # bit-exact
    assert report["restored_one_devices"] == 1
    assert report["restored_mesh_spec"] == FSDP_SPEC


def test_bad_mesh_sizes_fail_in_one_line_naming_the_field(report):
    errors = report["errors"]
    for msg in errors.values():
        assert msg is not None and msg.startswith("MeshError: ") and "\n" not in msg
    assert "mesh data*fsdp*tensor = 4" in errors["product"] and "8 local devices" in errors["product"]
    assert errors["rows"].startswith("MeshError: rft.batch_size=4 ")
    assert errors["auto_rows"].startswith("MeshError: rft.batch_size=4 ")
    assert "'fsdp': 8" in errors["auto_rows"]  # mesh=auto resolved to every device
