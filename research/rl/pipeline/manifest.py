"""Stage manifests: how one stage hands its checkpoints to the next.

``<out_dir>/<stage>/manifest.json`` = {stage, actor, critic (``models`` checkpoint directories, or None),
step, metrics (summary), config_hash, inputs (the manifest this stage started from), extra}. The hash
covers the stage's config *and* its input manifest's hash, so changing an earlier stage invalidates every
later one; a stage whose manifest exists with the same hash is not rerun.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._distributed import is_primary, sync

NAME = "manifest.json"


def config_hash(config: Any, parent: Manifest | None = None) -> str:
    body = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    text = json.dumps(
        {"config": body, "parent": parent.config_hash if parent else None}, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Manifest:
    stage: str
    actor: str | None
    critic: str | None
    step: int
    config_hash: str
    metrics: dict[str, Any] = field(default_factory=dict)
    inputs: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def save(self, directory) -> Path:
        """Written by process 0 (several JAX processes: every one calls it, none returns before the
        file is there)."""
        path = Path(directory) / NAME
        if is_primary():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2, default=str))
            os.replace(tmp, path)
        sync(f"manifest:{path}")
        return path

    @classmethod
    def load(cls, path) -> Manifest:
        path = Path(path)
        if path.is_dir():
            path = path / NAME
        if not path.is_file():
            raise FileNotFoundError(f"no stage manifest at {path}")
        data = json.loads(path.read_text())
        missing = {"stage", "actor", "critic", "step", "config_hash"} - set(data)
        if missing:
            raise ValueError(f"{path} is not a stage manifest (missing {sorted(missing)})")
        return cls(**data)

    @classmethod
    def find(cls, directory, expected_hash: str) -> Manifest | None:
        """The manifest in ``directory`` if it exists and was made by the same config and inputs."""
        try:
            m = cls.load(directory)
        except FileNotFoundError:
            return None
        return m if m.config_hash == expected_hash else None


def stage_line(name: str, m: Manifest) -> str:
    """One console line for a finished stage: its step and scalar metrics; for a stage that learned nothing
    (RFT accepting no trajectory, or turned off) why, and what it sampled and rejected, instead of ``{}``."""
    head = f"{name:9s} step {m.step:4d}  "
    reason = m.extra.get("reason")
    if not reason:
        scalars = {k: v for k, v in m.metrics.items() if not isinstance(v, dict)}
        return head + (str(scalars) if scalars else "no metrics (the stage ended before its first step)")
    sampled = m.extra.get("sampled")
    accepted = m.extra.get("accepted")
    kept = len(accepted) if isinstance(accepted, list) else accepted
    rejected = {
        k.split("/", 1)[1]: int(v)
        for k, v in m.extra.items()
        if k.startswith("rejected/") and k != "rejected/total" and v
    }
    parts = [f"{kept} of {sampled} sampled trajectories accepted"] if sampled is not None else []
    if rejected:
        parts.append("rejected: " + ", ".join(f"{k} {v}" for k, v in sorted(rejected.items())))
    detail = f" ({'; '.join(parts)})" if parts else ""
    return f"{head}learned nothing: {reason}{detail}; the previous stage's actor goes on unchanged"
