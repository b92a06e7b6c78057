"""The project's small build files (setup.py, setup.cfg) as text or a parsed tree, read through the bounded
reader (a regular file, at most MAX_SPEC bytes, UTF-8). None when a file is absent, too big or unreadable: the
readers that report on a file (sources/setup_py.py) say why; these callers only look for facts in it."""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

from envman.inputs import MAX_SPEC, read_regular_text


def small_text(root: Path, rel: str, limit: int = MAX_SPEC) -> str | None:
    try:
        return read_regular_text(root / rel, limit)
    except (OSError, UnicodeDecodeError):
        return None


def setup_py_tree(root: Path) -> ast.Module | None:
    text = small_text(root, "setup.py")
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def setup_cfg(root: Path) -> configparser.ConfigParser | None:
    text = small_text(root, "setup.cfg")
    if text is None:
        return None
    cp = configparser.ConfigParser(interpolation=None)
    try:
        cp.read_string(text)
    except configparser.Error:
        return None
    return cp
