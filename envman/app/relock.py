"""The first step of `envman lock`, kept light (standard library + lock/uvproc.py): start uv on the request
the project's last lock made, before the rest of envman is imported and the stack resolved. The lock use
case (app/generate.py) takes the run when its real request is the same, and kills it otherwise."""

from __future__ import annotations

from pathlib import Path

from envman.lock.uvproc import UvRun, speculate


def start_early(root: Path, *, upgrade: bool = False, timeout: float | None = None, progress=None) -> UvRun | None:
    if upgrade:
        return None  # --upgrade asks uv for newer pins: the last request's answer is not the one wanted
    return speculate(root, "pylock.toml", timeout, progress)
