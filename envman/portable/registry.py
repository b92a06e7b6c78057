"""A registry of plug-ins by name: the shipped ones, then any registered since (a plug-in, a test)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


class Registry(Generic[N]):
    def __init__(self, shipped: tuple[N, ...], what: str) -> None:
        self.items = list(shipped)
        self.what = what  # "a framework": how the error names one

    def registered(self) -> tuple[N, ...]:
        return tuple(self.items)

    def find(self, name: str) -> N | None:
        return next((p for p in self.items if p.name == name), None)

    def register(self, item: N) -> N:
        if self.find(item.name) is not None:
            raise ValueError("%s named %r is already registered" % (self.what, item.name))
        self.items.append(item)
        return item

    def unregister(self, name: str) -> None:
        self.items[:] = [p for p in self.items if p.name != name]

    @contextmanager
    def using(self, item: N) -> Iterator[N]:
        """``with frameworks.using(toy):`` - registered inside the block only."""
        self.register(item)
        try:
            yield item
        finally:
            self.unregister(item.name)
