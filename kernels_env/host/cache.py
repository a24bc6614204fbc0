"""A small on-disk JSON cache with atomic writes and self-verifying entries.

An entry is stored under the SHA-256 of its canonical key and holds that key; a read whose stored key differs
(hash collision, older format), or whose file is unreadable or corrupt, is a miss and is rebuilt. Writes go
to a temporary file in the same directory, are fsynced, then ``os.replace``d: a killed writer never leaves a
partial entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def key_hash(key: Any) -> str:
    return hashlib.sha256(canonical(key).encode()).hexdigest()


class JsonCache:
    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def path(self, key: Any) -> Path:
        h = key_hash(key)
        return self.directory / h[:2] / f"{h}.json"

    def get(self, key: Any) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # corrupt or unreadable: treated as a miss and overwritten by the rebuild
        if (
            not isinstance(entry, dict)
            or canonical(entry.get("key")) != canonical(key)
            or "value" not in entry
        ):
            return None
        return entry["value"]

    def put(self, key: Any, value: Any) -> Path:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"key": key, "value": value}, f, sort_keys=True, default=str)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path
