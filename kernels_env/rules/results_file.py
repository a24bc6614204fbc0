"""The resumable results file of many verdicts (``batch``, ``make examples``, solution sets): one JSON record
per line, appended as each verdict lands (flushed and fsynced, so a killed run loses at most a partial last
line, which the next read cuts off).

A record is keyed by its name (``key``: the solution's file name, or a solution set's key) and carries
``inputs_sha256``, the content hashes of the reference and the solution that were judged. A rerun skips a
record only when both hashes still match; an edited solution or reference is judged again and its old line
dropped first (an atomic rewrite), so the file ends with one record per solution, the latest. A record
written before the hashes were recorded says nothing about what it judged: it is judged again.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INPUTS = "inputs_sha256"  # {"reference": sha256, "solution": sha256} of what the record's verdict judged


def read_results(path: Path, key: str = "solution") -> dict[str, dict[str, Any]]:
    """Results already written, by ``key`` (the last line of a key wins); a partial (interrupted) last line
    is cut off the file."""
    done: dict[str, dict[str, Any]] = {}
    path = Path(path)
    if not path.exists():
        return done
    data = path.read_bytes()
    good_end = 0
    offset = 0
    for raw in data.splitlines(keepends=True):
        offset += len(raw)
        complete = raw.endswith(b"\n")
        try:
            record = json.loads(raw)
        except ValueError:
            if not complete:
                break  # the interrupted last line
            print(f"warning: {path}: skipping a malformed line", file=sys.stderr)
            good_end = offset
            continue
        if not complete:
            break
        good_end = offset
        if isinstance(record, dict) and key in record:
            done[record[key]] = record
    if good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return done


def append_line(f, record: Mapping[str, Any], inputs: Mapping[str, str] | None = None) -> None:
    """Append ``record`` (with its ``inputs`` hashes when given) and make it durable before going on."""
    record = {**record, INPUTS: dict(inputs)} if inputs is not None else record
    f.write(json.dumps(record, default=str) + "\n")
    f.flush()
    os.fsync(f.fileno())


@dataclass(frozen=True)
class ResumePlan:
    """What a rerun does with each name, in the order given."""

    new: list[str] = field(default_factory=list)  # no record yet
    changed: list[str] = field(default_factory=list)  # a record of other inputs (or of unknown ones): judged
    unchanged: list[str] = field(default_factory=list)  # a record of these very inputs: skipped
    unhashed: list[str] = field(default_factory=list)  # of ``changed``: records without ``inputs_sha256``

    @property
    def todo(self) -> set[str]:
        return set(self.new) | set(self.changed)

    def line(self) -> str:
        text = f"{len(self.unchanged)} unchanged, skipped; {len(self.changed)} re-judged; {len(self.new)} new"
        if self.unhashed:
            text += (
                f" ({len(self.unhashed)} re-judged because their results were written without input hashes,"
                " by an older version)"
            )
        return text


def plan_resume(
    inputs: Mapping[str, Mapping[str, str] | None], done: Mapping[str, Mapping[str, Any]]
) -> ResumePlan:
    """Which names to judge: ``inputs`` maps each name to the hashes of its reference and solution now (None:
    they cannot be read, so the judge will say why), ``done`` the records already written."""
    plan = ResumePlan()
    for name, hashes in inputs.items():
        record = done.get(name)
        if record is None:
            plan.new.append(name)
        elif hashes is None or record.get(INPUTS) != dict(hashes):
            plan.changed.append(name)
            if not isinstance(record.get(INPUTS), dict):
                plan.unhashed.append(name)
        else:
            plan.unchanged.append(name)
    return plan


def drop_records(path: Path, names: Collection[str], key: str = "solution") -> None:
    """Rewrite ``path`` without the records of ``names`` (every other line kept byte for byte), atomically:
    a crash leaves either the old file or the new one, never a mix."""
    path = Path(path)
    names = set(names)
    kept = []
    for raw in path.read_bytes().splitlines(keepends=True):
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        if not (isinstance(record, dict) and record.get(key) in names):
            kept.append(raw)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(b"".join(kept))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # the rename itself survives a power cut once the directory is synced (not possible everywhere)
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def resume_results(
    path: Path, inputs: Mapping[str, Mapping[str, str] | None], key: str = "solution"
) -> ResumePlan:
    """Read ``path``, plan the rerun against ``inputs`` and drop the records it will replace."""
    plan = plan_resume(inputs, read_results(path, key))
    if plan.changed:
        drop_records(path, plan.changed, key)
    return plan


def verdict_line(name: str, result: Mapping[str, Any]) -> str:
    """One verdict on the terminal, e.g. ``4_layernorm__torch.py: rejected (forbidden_op), reward -1``."""
    text = f"{name}: {result.get('status')}"
    if result.get("check"):
        text += f" ({result['check']})"
    if result.get("reward") is not None:
        text += f", reward {result['reward']:g}"
    speedups = {m: s for m, s in (result.get("speedups") or {}).items() if isinstance(s, (int, float))}
    if speedups:
        text += ", speedup " + ", ".join(f"{m} {s:.2f}x" for m, s in speedups.items())
    return text


class VerdictProgress:
    """A progress bar (when enabled) and one line per verdict as it lands, written through the bar when one is
    shown so that the lines never break it, printed plainly otherwise."""

    def __init__(self, total: int, initial: int, enabled: bool, unit: str = "sol"):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, initial=initial, disable=not enabled, unit=unit, dynamic_ncols=True)

    def landed(self, name: str, result: Mapping[str, Any]) -> None:
        line = verdict_line(name, result)
        if self.bar.disable:
            print(line, flush=True)
        else:
            self.bar.write(line)
        self.bar.set_postfix_str(f"{name}: {result.get('status')}", refresh=False)
        self.bar.update(1)

    def skipped(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
