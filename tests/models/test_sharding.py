"""Sharded forward/backward on 8 fake CPU devices vs one device, rules, Orbax restore onto other meshes.

Runs tests/models/sharded_check.py in a fresh interpreter: the fake device count must be set before jax is
imported, and other tests of this session have imported it already."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def report(sharded_report):
    return sharded_report


def test_eight_devices(report):
    assert report["devices"] == 8


def test_sharded_forward_and_backward_match_one_device(report):
    assert "tensor" in report["q_spec"] and "fsdp" in report["q_spec"]
    assert report["q_shard_shape"] == [2, 2, 16, 32]  # heads over tensor=2, width over fsdp=2
    assert report["logits_diff"] < 1e-5
    assert report["loss_diff"] < 1e-5
    assert report["grad_diff"] < 1e-5
    assert report["critic_diff"] < 1e-5


def test_rules_drop_axes_that_do_not_divide(report):
    assert "tensor" not in report["kv_spec_t4"] and "fsdp" in report["kv_spec_t4"]
    assert "tensor" not in report["norm_spec"] and "fsdp" not in report["norm_spec"]
    assert "fsdp" in report["custom_rule"] and "tensor" not in report["custom_rule"]


def test_orbax_restores_onto_another_mesh_bit_exact(report):
    assert report["restore_b_diff"] == 0.0 and report["restore_single_diff"] == 0.0
    assert "tensor" in report["restore_b_spec"] and "fsdp" in report["restore_b_spec"]
    assert report["restore_single_devices"] == 1
    assert report["critic_restore_diff"] == 0.0


def test_load_hf_onto_a_mesh(report):
    assert "fsdp" in report["load_hf_spec"] and "tensor" in report["load_hf_spec"]
    assert report["load_hf_diff"] == 0.0
