"""Shared glue for the Hydra entry points: turn a composed config node into a typed library dataclass, and
turn a user's mistake into one line instead of a traceback (``user_errors``)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

T = TypeVar("T")
# The config directory, absolute: the mains find it whether run as scripts, modules or imported (tests).
CONF = str(Path(__file__).resolve().parents[1] / "conf")


class ConfigError(ValueError):
    """A config that does not match the library dataclass it must fill (unknown key, wrong type, a value the
    dataclass rejects), a required value not given, or an input path that is not there."""


# What a user causes and a traceback would not help with: a bad config, a path that does not exist.
# Entry points add their library's own user-error types (e.g. SolutionSetError).
USER_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    FileNotFoundError,
    NotADirectoryError,
    FileExistsError,
)
# The files Hydra writes into a run directory before the job starts (its .hydra/ and the job log).
_HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


def to_dataclass(cls: type[T], node: DictConfig | dict[str, Any] | None, *, where: str = "") -> T:
    """Validate ``node`` against ``cls`` (unknown keys and wrong types are errors) and instantiate it.

    Library code stays free of Hydra/OmegaConf: it only ever sees the returned plain dataclass.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    schema = OmegaConf.structured(cls)
    label = f" in '{where}'" if where else ""
    try:
        merged = OmegaConf.merge(schema, node if node is not None else {})
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        key = f"{exc.full_key}: " if getattr(exc, "full_key", None) else ""
        msg = str(getattr(exc, "msg", None) or exc).splitlines()[0]
        raise ConfigError(f"invalid config{label} for {cls.__name__}: {key}{msg}") from None
    except ValueError as exc:  # a value the dataclass itself rejects (its __post_init__)
        raise ConfigError(f"invalid config{label} for {cls.__name__}: {one_line(exc)}") from None


def save_config(cfg: DictConfig, out_dir: str | Path, name: str = "config.yaml") -> Path:
    """The composed config, interpolations resolved, as ``<out_dir>/<name>``: a run folder says how it was
    made even when it is not Hydra's run directory (whose .hydra/ holds the unresolved one)."""
    path = Path(out_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, path, resolve=True)
    return path


def one_line(exc: BaseException) -> str:
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def missing_keys(cfg: DictConfig, prefix: str = "") -> Iterator[str]:
    """Keys whose value is ``???`` (a value only the user can give), ``hydra`` left out."""
    for key in cfg:
        path = f"{prefix}{key}"
        if path == "hydra":
            continue
        if OmegaConf.is_missing(cfg, key):
            yield path
        elif OmegaConf.is_dict(cfg._get_node(key)) and cfg[key] is not None:  # not an Optional left None
            yield from missing_keys(cfg[key], path + ".")


def _leaves_missing(node: Any, prefix: str) -> Iterator[str]:
    for key, value in node.items() if isinstance(node, dict) else ():
        if value == "???":
            yield f"{prefix}{key}"
        yield from _leaves_missing(value, f"{prefix}{key}.")


def required_by_choices() -> Iterator[str]:
    """Keys the root config or a chosen group option sets to ``???`` in its YAML and the command line does not
    give. Such a key's schema default survives the composition (a ``???`` merged onto a value leaves the
    value), so the composed config no longer shows that the option requires it (eval=kernelbench's
    solutions_dir, tasks=data's path)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        hc = HydraConfig.get()
    except ValueError:  # not under Hydra (a test calling main's body)
        return
    given = {o.split("=", 1)[0].lstrip("+~") for o in hc.overrides.task}
    files = [(Path(CONF) / f"{hc.job.config_name}.yaml", "")]
    for group, option in hc.runtime.choices.items():
        if option and not group.startswith("hydra/"):
            files.append((Path(CONF) / group / f"{option}.yaml", group.replace("/", ".") + "."))
    for path, prefix in files:
        if path.is_file():
            text = path.read_text()
            package = "" if "# @package _global_" in text.split("\n", 1)[0] else prefix
            yield from (k for k in _leaves_missing(yaml.safe_load(text) or {}, package) if k not in given)


def check_inputs(
    cfg: DictConfig, dirs: Mapping[str, str | None] | None = None, paths: Sequence[str] = ()
) -> None:
    """Every required value given; each key of ``dirs`` a directory (holding a match of its glob, when one is
    given); each key of ``paths`` an existing file or directory. Keys absent, null or "" are not checked."""
    for key in [*missing_keys(cfg), *required_by_choices()]:
        raise ConfigError(f"{key} is required: give {key}=... on the command line")
    for key, pattern in (dirs or {}).items():
        value = OmegaConf.select(cfg, key, default=None)
        if value in (None, ""):
            continue
        path = Path(str(value)).expanduser()
        if not path.exists():
            raise ConfigError(f"{key}={value}: no such directory")
        if not path.is_dir():
            raise ConfigError(f"{key}={value}: not a directory")
        if pattern and next(path.glob(pattern), None) is None:
            raise ConfigError(f"{key}={value}: empty (no {pattern} in it)")
    for key in paths:
        value = OmegaConf.select(cfg, key, default=None)
        if value not in (None, "") and not Path(str(value)).expanduser().exists():
            raise ConfigError(f"{key}={value}: no such file or directory")


def _drop_empty_run_dir() -> None:
    """Remove the run directory Hydra made for this job when the failed job left nothing else in it (only
    Hydra's .hydra/ files and an empty job log), then its parents that are empty, below the working
    directory; a sweep directory goes too when the job's was its only one (the basic launcher stops there)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        hc = HydraConfig.get()
    except ValueError:  # not under Hydra (a test calling main's body)
        return
    out = Path(hc.runtime.output_dir).resolve()
    cwd = Path(hc.runtime.cwd).resolve()
    if out == cwd or out in cwd.parents:
        return
    meta = out / hc.output_subdir if hc.output_subdir else None
    log = out / f"{hc.job.name}.log"
    if any(p not in (meta, log) for p in out.iterdir()):
        return
    if meta is not None and meta.is_dir():
        if any(p.name not in _HYDRA_FILES for p in meta.iterdir()):
            return
        for name in _HYDRA_FILES:
            (meta / name).unlink(missing_ok=True)
        meta.rmdir()
    if log.is_file() and log.stat().st_size == 0:
        log.unlink()
    with contextlib.suppress(OSError):
        out.rmdir()
    sweep = Path(hc.sweep.dir).resolve() if hc.mode == RunMode.MULTIRUN else None
    if sweep is not None and sweep.is_dir() and [p.name for p in sweep.iterdir()] == ["multirun.yaml"]:
        (sweep / "multirun.yaml").unlink()
        sweep.rmdir()
    for parent in out.parents:
        if parent == cwd or cwd not in parent.parents:
            break
        if parent.exists():
            try:
                parent.rmdir()  # only an empty one
            except OSError:
                break


@contextlib.contextmanager
def user_errors(
    cfg: DictConfig,
    *errors: type[BaseException],
    dirs: Mapping[str, str | None] | None = None,
    paths: Sequence[str] = (),
) -> Iterator[None]:
    """The body of every entry point's main: ``check_inputs(cfg, dirs, paths)`` first; a user error (one of
    ``USER_ERRORS`` or ``errors``) becomes ``error: <one line>`` on stderr and exit code 2, and the run
    directory it leaves empty is removed. ``HYDRA_FULL_ERROR=1`` shows the traceback instead, as Hydra's."""
    try:
        check_inputs(cfg, dirs, paths)
        yield
    except (*USER_ERRORS, *errors) as exc:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        _drop_empty_run_dir()
        print(f"error: {one_line(exc)}", file=sys.stderr)
        sys.exit(2)
