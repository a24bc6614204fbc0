"""One PPO step sharded over 8 fake CPU devices ((data, fsdp, tensor) = (2, 2, 2), models.DEFAULT_RULES)
equals the same step on one device, and a learner checkpoint written on that mesh restores onto (1, 2, 4)
and onto one device. Measurements come from tests/rl/sharded_check.py (see conftest.py).

1e-5 absolute: fp32 on both sides, only reduction order differs (collectives vs one device); gradients
here are of order 1 (``grad_scale``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def report(sharded_report):
    return sharded_report


def test_really_sharded(report):
    assert report["devices"] == 8
    assert report["q_spec"] == report["q_spec_after"] == "P(None, 'tensor', None, 'fsdp')"
    assert report["tokens_sharding"] == "P(('data', 'fsdp'),)"


def test_sharded_ppo_update_equals_one_device(report):
    assert report["grad_scale"] > 1e-2
    assert report["prepare_diff"] < 1e-5  # old log-probs, values, advantages, returns
    assert report["grad_diff"] < 1e-5
    assert report["metric_diff"] < 1e-5
    assert report["param_diff"] < 1e-5
    assert report["opt_diff"] < 1e-5


def test_checkpoint_restores_onto_other_meshes(report):
    assert report["restore_diff"] == 0.0  # bit-exact
    assert report["restored_step"] == [1, 1]
    assert report["cursor"] == {"batch": 7}
    assert report["restored_spec"] == "P(None, 'tensor', None, 'fsdp')"
    assert report["after_restore_metric_diff"] < 1e-5
