"""The frameworks envman knows, one module each (``torch.py``, ``tensorflow.py``), and the registry the
generic code reads: the matrix loader (which files, which schema), the request parser (names, aliases),
requirement discovery (distributions, companions) and the lock (pins). docs/frameworks.md says how to
add one. ``FRAMEWORKS`` is the shipped set, in matrix order; the generic code asks ``registered()``, which
also sees any ``register``-ed since.
"""

from __future__ import annotations

from envman.frameworks.base import Framework, exact_pins
from envman.frameworks.jax import JAX
from envman.frameworks.tensorflow import TENSORFLOW
from envman.frameworks.torch import TORCH
from envman.portable.registry import Registry

FRAMEWORKS: tuple[Framework, ...] = (TORCH, TENSORFLOW, JAX)

_registry = Registry(FRAMEWORKS, "a framework")
registered = _registry.registered
register = _registry.register
unregister = _registry.unregister
using = _registry.using

__all__ = ["FRAMEWORKS", "Framework", "aliases", "by_alias", "by_distribution", "companions", "exact_pins", "get", "index_packages",
           "register", "registered", "unregister", "using"]


def get(name: str) -> Framework:
    fw = _registry.find(name)
    if fw is None:
        raise KeyError(name)
    return fw


def aliases() -> dict[str, str]:
    """Other names a user may type → framework name: ``{"pytorch": "torch", "tf": "tensorflow", …}``."""
    return {a: f.name for f in _registry.items for a in f.aliases}


def by_alias(text: str) -> Framework | None:
    """The framework a user means by ``text`` (its name or an alias, any case), or None."""
    key = text.lower()
    return next((f for f in _registry.items if key == f.name or key in f.aliases), None)


def by_distribution() -> dict[str, str]:
    """Canonical pip name → framework name, for every distribution that installs a framework."""
    return {d: f.name for f in _registry.items for d in f.distributions}


def index_packages() -> tuple[str, ...]:
    return tuple(p for f in _registry.items for p in f.index_packages)


def companions() -> tuple[str, ...]:
    return tuple(c for f in _registry.items for c in f.companions)
