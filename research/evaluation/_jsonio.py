"""Reading and writing the study's versioned JSON files (results, protocol manifest): one place for the
one-line errors that name the file and for the atomic write."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_json(path: Path, schema: str, error: type[Exception], missing: str, kind: str) -> dict[str, Any]:
    """The JSON object at ``path`` whose ``schema`` is ``schema``; else ``error`` in one line:
    ``{missing} at {path}``, ``{path}: not JSON (...)`` or ``{path}: not a {schema} {kind}``."""
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{missing} at {path}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(d, dict) or d.get("schema") != schema:
        raise error(f"{path}: not a {schema} {kind}")
    return d


def write_json(path: Path, data: Any, **dumps: Any) -> None:
    """``json.dumps(data, **dumps)`` to ``path`` through a temporary file beside it, so a reader never sees
    half a file (and a value that fails to serialise leaves the old file as it was)."""
    text = json.dumps(data, **dumps)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
