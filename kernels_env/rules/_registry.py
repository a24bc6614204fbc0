"""Things by name (policies, judge protocols, rewards): a dict that names what is known when asked for
what is not."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(dict[str, T], Generic[T]):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str, value: T) -> T:
        self[name] = value
        return value

    def get_named(self, name: str) -> T:
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {sorted(self)}")
        return self[name]
