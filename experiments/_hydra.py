"""Shared glue for the Hydra entry points: turn a composed config node into a typed library dataclass."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

T = TypeVar("T")


class ConfigError(ValueError):
    """A config that does not match the library dataclass it must fill (unknown key, wrong type)."""


def to_dataclass(cls: type[T], node: DictConfig | dict[str, Any] | None, *, where: str = "") -> T:
    """Validate ``node`` against ``cls`` (unknown keys and wrong types are errors) and instantiate it.

    Library code stays free of Hydra/OmegaConf: it only ever sees the returned plain dataclass.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    schema = OmegaConf.structured(cls)
    try:
        merged = OmegaConf.merge(schema, node if node is not None else {})
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        label = f" in '{where}'" if where else ""
        raise ConfigError(f"invalid config{label} for {cls.__name__}: {exc}") from None
