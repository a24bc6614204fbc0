"""A tiny task pool for the study's pipeline tests: the agent fixtures' scale problem at several sizes as a
``research.data`` JSONL dataset (each record its own signature and category), and a protocol over it with
one task per test split (``min_test_tasks=1``: a fixture, not a study)."""

from __future__ import annotations

import json
from pathlib import Path

from research.agent import TasksConfig
from research.agent.data_tasks import read_records
from research.evaluation import ProtocolConfig, make_protocol, write_protocol
from tests.rl.agent_fixtures import SCALE_PROBLEM

SIZES = (256, 128, 192, 320, 64, 96, 160)


def write_pool(root: Path, heldout: int = 1) -> Path:
    """``len(SIZES)`` scale tasks (the last ``heldout`` in category reduction, the rest elementwise)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "pool.jsonl"
    rows = []
    for i, n in enumerate(SIZES):
        cat = "reduction" if i >= len(SIZES) - heldout else "elementwise"
        source = SCALE_PROBLEM.replace("torch.randn(256)", f"torch.randn({n})")
        rows.append({"id": f"scale{n}", "source": source, "category": cat, "signature": f"sig{n}"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def pool_config(pool: Path, protocol: Path | str = "") -> TasksConfig:
    return TasksConfig(source="data", path=str(pool), protocol=str(protocol))


def write_pool_protocol(pool: Path, out: Path, n_dev: int = 1):
    """protocol.json over the pool's records as the agent loop reads them: one test_seen, one test_heldout
    (category reduction) and ``n_dev`` dev tasks; the rest train."""
    cfg = ProtocolConfig(
        heldout_category="reduction", n_dev=n_dev, n_test_seen=1, n_test_heldout=1, min_test_tasks=1
    )
    protocol = make_protocol(read_records(pool_config(pool)), cfg)
    return protocol, write_protocol(protocol, out)
