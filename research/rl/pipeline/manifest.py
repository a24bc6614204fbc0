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
        path = Path(directory) / NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2, default=str))
        os.replace(tmp, path)
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
