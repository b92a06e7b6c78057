"""The registry of framework plug-ins the smoke program, the package probe and the doctor read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from . import jax, tensorflow, torch
from .base import Installed, Plugin, variant_label

PLUGINS = (torch.PLUGIN, tensorflow.PLUGIN, jax.PLUGIN)

_registry = list(PLUGINS)

__all__ = ["PLUGINS", "Installed", "Plugin", "get", "label", "names", "register", "registered", "unregister",
           "using"]


def names() -> tuple[str, ...]:
    return tuple(p.name for p in _registry)


def registered() -> tuple[Plugin, ...]:
    """The shipped plug-ins, then any registered since (the doctor reads installed frameworks through these)."""
    return tuple(_registry)


def get(name: str) -> Plugin | None:
    """The plug-in for a framework name, or None."""
    return next((p for p in _registry if p.name == name), None)


def label(name: str, version: str, variant: str | None) -> str:
    """How the doctor's verdicts name a build of framework ``name``: its plug-in says (JAX names its CUDA plugin)."""
    plugin = get(name)
    return (plugin.label if plugin is not None else variant_label)(name, version, variant)


def register(plugin: Plugin) -> Plugin:
    if get(plugin.name) is not None:
        raise ValueError("a smoke plug-in named %r is already registered" % plugin.name)
    _registry.append(plugin)
    return plugin


def unregister(name: str) -> None:
    _registry[:] = [p for p in _registry if p.name != name]


@contextmanager
def using(plugin: Plugin) -> Iterator[Plugin]:
    """``with frameworks.using(toy):`` - registered inside the block only."""
    register(plugin)
    try:
        yield plugin
    finally:
        unregister(plugin.name)
