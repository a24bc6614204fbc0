"""Guard unit tests run in this process; Triton (interpreter mode without a GPU) must see TRITON_INTERPRET
before it is first imported."""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
