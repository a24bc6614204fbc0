"""Shared pytest setup: the `gpu` marker skips without a CUDA device; tiny fixtures live in tests/fixtures."""

from __future__ import annotations

import functools
import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@functools.cache
def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
