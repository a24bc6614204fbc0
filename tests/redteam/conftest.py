"""Red-team fixtures: the corpus is judged from a private copy of problems/ and solutions/ (attacks that try
to edit files could only ever reach the copy)."""

from __future__ import annotations

import os
import shutil

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def redteam_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("redteam")
    for sub in ("problems", "solutions"):
        shutil.copytree(os.path.join(_HERE, sub), root / sub)
    return root
