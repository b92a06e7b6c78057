"""The frameworks envman knows, one module each (``torch.py``, ``tensorflow.py``), and the registry the
generic code reads: the matrix loader (which files, which schema), the request parser (names, aliases),
requirement discovery (distributions, companions) and the lock (pins). docs/frameworks.md says how to
add one.

``FRAMEWORKS`` is the shipped set, in matrix order. ``register`` adds another at run time (a plug-in, a
test); the generic code asks ``registered()``, so it sees both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from envman.frameworks.base import Framework, exact_pins
from envman.frameworks.jax import JAX
from envman.frameworks.tensorflow import TENSORFLOW
from envman.frameworks.torch import TORCH

FRAMEWORKS: tuple[Framework, ...] = (TORCH, TENSORFLOW, JAX)

_registry: list[Framework] = list(FRAMEWORKS)

__all__ = ["FRAMEWORKS", "Framework", "aliases", "by_alias", "by_distribution", "companions", "exact_pins", "get", "index_packages",
           "register", "registered", "unregister", "using"]


def registered() -> tuple[Framework, ...]:
    """The shipped frameworks, then any registered since, in registration order."""
    return tuple(_registry)


def register(fw: Framework) -> Framework:
    if any(f.name == fw.name for f in _registry):
        raise ValueError(f"a framework named {fw.name!r} is already registered")
    _registry.append(fw)
    return fw


def unregister(name: str) -> None:
    _registry[:] = [f for f in _registry if f.name != name]


@contextmanager
def using(fw: Framework) -> Iterator[Framework]:
    """``with frameworks.using(toy):`` — registered inside the block only."""
    register(fw)
    try:
        yield fw
    finally:
        unregister(fw.name)


def get(name: str) -> Framework:
    for f in _registry:
        if f.name == name:
            return f
    raise KeyError(name)


def aliases() -> dict[str, str]:
    """Other names a user may type → framework name: ``{"pytorch": "torch", "tf": "tensorflow", …}``."""
    return {a: f.name for f in _registry for a in f.aliases}


def by_alias(text: str) -> Framework | None:
    """The framework a user means by ``text`` (its name or an alias, any case), or None."""
    key = text.lower()
    return next((f for f in _registry if key == f.name or key in f.aliases), None)


def by_distribution() -> dict[str, str]:
    """Canonical pip name → framework name, for every distribution that installs a framework."""
    return {d: f.name for f in _registry for d in f.distributions}


def index_packages() -> tuple[str, ...]:
    """Every framework's packages its own wheel index may serve, in registry order."""
    return tuple(p for f in _registry for p in f.index_packages)


def companions() -> tuple[str, ...]:
    """Every framework's companions, in registry order."""
    return tuple(c for f in _registry for c in f.companions)
