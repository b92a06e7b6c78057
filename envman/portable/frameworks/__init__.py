"""The registry of framework plug-ins the smoke program, the package probe and the doctor read."""

from __future__ import annotations

from ..registry import Registry
from . import jax, tensorflow, torch
from .base import Installed, Plugin, variant_label

PLUGINS = (torch.PLUGIN, tensorflow.PLUGIN, jax.PLUGIN)

_registry = Registry(PLUGINS, "a smoke plug-in")
registered = _registry.registered
get = _registry.find
register = _registry.register
unregister = _registry.unregister
using = _registry.using

__all__ = ["PLUGINS", "Installed", "Plugin", "get", "label", "names", "register", "registered", "unregister",
           "using"]


def names() -> tuple[str, ...]:
    return tuple(p.name for p in _registry.items)


def label(name: str, version: str, variant: str | None) -> str:
    """How the doctor's verdicts name a build of framework ``name``: its plug-in says (JAX names its CUDA plugin)."""
    plugin = get(name)
    return (plugin.label if plugin is not None else variant_label)(name, version, variant)
