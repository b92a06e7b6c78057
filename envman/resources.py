"""Where envman's shipped data and its caches live: the one copy of each locator.

matrices/ and templates/ sit beside the package in a source checkout and inside it (envman/matrices,
envman/templates) in a wheel; the portable island is a subpackage either way.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def shipped_dir(name: str, marker: str) -> Path:
    """A data folder of envman's; ``marker`` is a file that must be in it."""
    for cand in (PACKAGE_DIR / name, PACKAGE_DIR.parent / name):
        if (cand / marker).is_file():
            return cand
    return PACKAGE_DIR.parent / name


def matrix_dir() -> Path:
    """The compatibility matrix envman reads: ENVMAN_MATRIX_DIR if set (the test suite points it at its
    frozen fixture so that a data change never moves a logic or golden test), else the shipped matrices/.
    A variable that names no folder is the user's setting, said as such (not seven unreadable matrix files)."""
    value = os.environ.get("ENVMAN_MATRIX_DIR")
    if not value:
        return shipped_matrix_dir()
    d = Path(value)
    if not d.is_dir():
        from envman.errors import UsageError

        what = "is not a folder" if d.exists() else "is not a folder (nothing is there)"
        raise UsageError(f"ENVMAN_MATRIX_DIR={value} {what}",
                         hint="point ENVMAN_MATRIX_DIR at a folder of matrix files (a copy of envman's matrices/), "
                              "or unset it to use the matrix envman ships")
    return d


def shipped_matrix_dir() -> Path:
    return shipped_dir("matrices", "cuda.yaml")


def matrix_file(name: str, directory: Path | None = None) -> Path:
    """``name`` in the matrix in use, or envman's shipped copy when that matrix (an older ENVMAN_MATRIX_DIR copy)
    has none. Only a missing file falls back: a FIFO or a link there is that file, which the bounded reader refuses."""
    path = (directory or matrix_dir()) / name
    return path if path.exists() or path.is_symlink() else shipped_matrix_dir() / name


def templates_dir() -> Path:
    return shipped_dir("templates", "Dockerfile.j2")


def portable_dir() -> Path:
    """The standard-library island copied whole into every image."""
    return PACKAGE_DIR / "portable"


def cache_dir() -> Path:
    """envman's disk cache (the parsed matrix, the doctor's knowledge): ENVMAN_CACHE_DIR, else XDG's."""
    from envman.hostenv import cache_root

    return Path(cache_root())
