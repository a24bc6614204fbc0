"""A KernelBench checkout: where it is and which problem file a (level, id) or a name refers to.

The checkout is read unchanged and never copied: a path given by config, else ``$KERNELBENCH_DIR``. Accepted
layouts: the repository root (``KernelBench/levelN/``), its ``KernelBench/`` folder, or a folder holding
``levelN/`` directly. Problem files are ``levelN/<id>_<Name>.py``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "KERNELBENCH_DIR"
_FILE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_DIR = re.compile(r"^level(\d+)$")


class KernelBenchNotFound(FileNotFoundError):
    """No KernelBench checkout where the config or $KERNELBENCH_DIR points (one-line message)."""


@dataclass(frozen=True)
class Problem:
    level: int
    id: int
    name: str  # the file's name part, e.g. "Matmul_with_diagonal_matrices_"
    path: Path

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def key(self) -> str:
        return f"level{self.level}/{self.stem}"


def find_kernelbench(path: str | os.PathLike | None = None) -> Path:
    """The folder that holds ``level1/``, ``level2/``, ... (``path`` or ``$KERNELBENCH_DIR``)."""
    raw = path if path not in (None, "") else os.environ.get(ENV_VAR)
    if not raw:
        raise KernelBenchNotFound(
            f"no KernelBench checkout: set {ENV_VAR} or the config's kernelbench_dir to a clone of "
            "ScalingIntelligence/KernelBench"
        )
    root = Path(raw).expanduser()
    for cand in (root, root / "KernelBench"):
        if cand.is_dir() and any(_LEVEL_DIR.match(p.name) for p in cand.iterdir() if p.is_dir()):
            return cand
    origin = "" if path not in (None, "") else f" (from ${ENV_VAR})"
    raise KernelBenchNotFound(f"{root}{origin} is not a KernelBench checkout: no level1/ ... folders in it")


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", name.lower())


class ProblemIndex:
    """Every problem file of a checkout, by (level, id), by file stem and by normalised name."""

    def __init__(self, root: str | os.PathLike | None = None, levels: list[int] | None = None):
        self.root = find_kernelbench(root)
        self.problems: list[Problem] = []
        for d in sorted(self.root.iterdir()):
            m = _LEVEL_DIR.match(d.name)
            if not (d.is_dir() and m) or (levels and int(m.group(1)) not in levels):
                continue
            for f in sorted(d.glob("*.py")):
                fm = _FILE.match(f.name)
                if fm:
                    self.problems.append(Problem(int(m.group(1)), int(fm.group(1)), fm.group(2), f))
        if not self.problems:
            raise KernelBenchNotFound(f"{self.root}: no problem files (levelN/<id>_<Name>.py)")
        self._by_id = {(p.level, p.id): p for p in self.problems}
        self._by_name: dict[tuple[int | None, str], list[Problem]] = {}
        for p in self.problems:
            for key in {_norm(p.stem), _norm(p.name)}:
                self._by_name.setdefault((p.level, key), []).append(p)
                self._by_name.setdefault((None, key), []).append(p)

    def __len__(self) -> int:
        return len(self.problems)

    def levels(self) -> list[int]:
        return sorted({p.level for p in self.problems})

    def tasks_at(self, levels) -> list[tuple[int, str]]:
        """(level, file stem) of every problem at ``levels`` (ints or their strings, e.g. "2"): the tasks a
        solution set at those levels is counted against (one it left out counts as failed)."""
        wanted = {str(v) for v in levels}
        return [(p.level, p.stem) for p in self.problems if str(p.level) in wanted]

    def lookup(self, level: int | None, problem_id: int | None, name: str | None) -> Problem | None:
        """By (level, id) when both are known; else by name (file stem or name part, case and punctuation
        ignored; ``level2/19_X.py`` or ``19_X`` work too). None when nothing or several match."""
        if level is not None and problem_id is not None:
            return self._by_id.get((level, problem_id))
        if not name:
            return None
        base = Path(str(name)).name
        base = base[:-3] if base.endswith(".py") else base
        m = re.search(r"level[_\- ]?(\d+)", str(name), re.I)
        if level is None and m:
            level = int(m.group(1))
        fm = re.match(r"^(\d+)_", base)
        if fm and level is not None and problem_id is None:
            hit = self._by_id.get((level, int(fm.group(1))))
            if hit is not None and _norm(hit.stem) == _norm(base):
                return hit
        hits = self._by_name.get((level, _norm(base)), [])
        return hits[0] if len(hits) == 1 else None
