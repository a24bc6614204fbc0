"""Registries by name (verl style): advantage estimators, policy losses, KL estimators, aggregations,
reward placements. A config names its choice; ``get`` fails with the known names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Callable[..., Any]] = {}

    def register(self, name: str):
        def wrap(fn):
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = fn
            return fn

        return wrap

    def get(self, name: str):
        if name not in self._items:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {sorted(self._items)}")
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items
