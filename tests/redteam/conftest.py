"""Red-team fixtures. Without a GPU, Triton solutions run in the interpreter: TRITON_INTERPRET must be set
before anything imports triton (torch._dynamo does), so it is set here, and torch._dynamo/triton are imported
once in this process so that each forked judge child starts warm."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch._dynamo  # noqa: F401,E402 - warm the parent; forked children inherit it
    import triton  # noqa: F401,E402


@pytest.fixture(scope="session")
def redteam_tree(tmp_path_factory):
    """A private copy of problems/ and solutions/: attacks that try to edit files only ever reach the copy."""
    root = tmp_path_factory.mktemp("redteam")
    for sub in ("problems", "solutions"):
        shutil.copytree(os.path.join(_HERE, sub), root / sub)
    return root
