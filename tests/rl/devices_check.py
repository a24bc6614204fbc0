"""Run by test_distributed.py in a fresh interpreter: experiments.train's start_jax applies the devices
config before JAX has a backend (XLA reads both settings when it creates one). Prints one JSON line."""

from __future__ import annotations

import json
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"  # what the sandbox's workers inherit: must stay untouched
os.environ.pop(MEM := "XLA_PYTHON_CLIENT_MEM_FRACTION", None)

from hydra import compose, initialize_config_dir  # noqa: E402
from jax._src import xla_bridge  # noqa: E402

import experiments.train as train  # noqa: E402

with initialize_config_dir(config_dir=sys.argv[1], version_base="1.3"):
    cfg = train.to_config(compose("train", sys.argv[2:]))
out = {"backends_before": xla_bridge.backends_are_initialized()}
train.start_jax(cfg)
import jax  # noqa: E402

out.update(
    mem_fraction=os.environ.get(MEM),
    jax_cuda_visible_devices=xla_bridge.CUDA_VISIBLE_DEVICES.value,  # the flag jax_cuda_visible_devices
    cuda_visible_devices=os.environ["CUDA_VISIBLE_DEVICES"],
    sandbox_gpus=cfg.sandbox.gpus,
    devices=jax.device_count(),  # creates the backend
)
try:
    train.start_jax(cfg)
    out["late_error"] = None
except RuntimeError as exc:
    out["late_error"] = str(exc)
print(json.dumps(out))
