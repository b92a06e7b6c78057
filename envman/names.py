"""Normalisation of GPU names, shared by the matrix loader and the target lookup."""

from __future__ import annotations

import re

_DROP = re.compile(r"\b(nvidia|geforce|tesla)\b")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_gpu_name(text: str) -> str:
    """``NVIDIA GeForce RTX 4090`` and ``rtx-4090`` both become ``rtx4090``."""
    t = _DROP.sub(" ", str(text).lower())
    return _NON_ALNUM.sub("", t)
