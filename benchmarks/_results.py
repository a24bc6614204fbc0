"""The one results writer of the benchmarks: every benchmark's JSON goes through ``write_results``, which
records with it where it came from (GPU or device name, driver and library versions, date, git commit, the
command line) and writes it atomically. Without ``--out`` a result lands in ``runs/benchmarks/<name>.json``
(git-ignored): results people cite are curated into ``docs/results/`` by hand, not written into the tree."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import sys
from pathlib import Path

from kernels_env.host.environment import cuda_driver_api, nvidia_smi

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "benchmarks"

PACKAGES = (
    "jax",
    "jaxlib",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
    "flax",
    "optax",
    "orbax-checkpoint",
    "torch",
    "triton",
    "transformers",
    "numpy",
    "nvidia-cudnn-cu13",
)


def env_info() -> dict:
    """GPU name, driver, CUDA, package versions and date (never raises; ``gpu`` is None without one)."""
    info: dict = {
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "versions": {},
    }
    for pkg in PACKAGES:
        try:
            info["versions"][pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            info["versions"][pkg] = None
    smi = nvidia_smi("name", "driver_version", "memory.total")
    if smi:
        info.update(gpu=smi["name"], driver=smi["driver_version"], gpu_memory=smi["memory.total"])
    info.setdefault("gpu", None)
    info["device"] = info["gpu"] or f"cpu ({platform.machine()})"  # (platform.processor() runs uname)
    info["cuda_driver_api"] = cuda_driver_api()
    return info


def git_commit(root: Path = ROOT) -> str | None:
    """HEAD's commit, read from the git directory itself (no subprocess; a worktree's ``.git`` is a file
    naming its git directory, whose refs live in the common directory). None outside a checkout."""
    try:
        git = root / ".git"
        if git.is_file():
            git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
        common = git / (git / "commondir").read_text().strip() if (git / "commondir").exists() else git
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(":", 1)[1].strip()
        for base in (git, common):
            if (base / ref).exists():
                return (base / ref).read_text().strip()
        for line in (common / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return None


def command_line() -> str:
    """The command as typed (``python -m benchmarks.<area>.<name> ...``), not the module's file path."""
    return shlex.join(getattr(sys, "orig_argv", sys.argv))


def run_record(env: bool = True) -> dict:
    """Where a result came from; ``env=False`` when the result carries ``env_info()`` already."""
    out: dict = {"git_commit": git_commit(), "command": command_line(), "cwd": os.getcwd()}
    if env:
        out["env"] = env_info()
    return out


def default_path(name: str) -> Path:
    return RUNS / f"{name}.json"


def write_json(path, data, indent: int = 2) -> None:
    """Atomic JSON write (a killed run never leaves half a file); for part files between processes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent, default=str) + "\n")
    tmp.replace(path)


def read_json(path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def write_results(name: str, data: dict, out=None, indent: int = 2) -> Path:
    """Write a benchmark's result to ``out``, or ``runs/benchmarks/<name>.json``, with its provenance added
    to ``data`` itself under ``run`` (once: progressive writes keep the first record), so that what a
    benchmark returns is what it wrote."""
    path = Path(out) if out else default_path(name)
    if not isinstance(data.get("run"), dict) or "git_commit" not in data["run"]:
        if "run" in data:
            raise ValueError(f"{name}: the key 'run' is the results writer's (provenance)")
        data["run"] = run_record(env=not any(k in data for k in ("env", "environment")))
    write_json(path, data, indent=indent)
    return path
