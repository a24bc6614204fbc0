"""Things by name, the project's one ``Registry`` type (sandbox policies, judge protocols, rewards here;
agent policies, advantage estimators, losses and reward placements in ``research``, through
``kernels_env.client``): a dict that names what is known when asked for what is not."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")
_DECORATE = object()


class Registry(dict[str, T], Generic[T]):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str, value=_DECORATE):
        """``register(name, value)`` returns ``value``; ``@register(name)`` registers what it decorates. A
        name is registered once (a second registration would silently replace the first)."""
        if value is _DECORATE:
            return lambda fn: self.register(name, fn)
        if name in self:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self[name] = value
        return value

    def get_named(self, name: str) -> T:
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {sorted(self)}")
        return self[name]

    def names(self) -> list[str]:
        return sorted(self)


__all__ = ["Registry"]
