"""The first step of `envman lock`: start uv on the request the project's last lock made, before the rest of
envman is imported and the stack resolved. The lock use case (app/generate.py) takes the run when its real
request is the same, and kills it otherwise.

Two moments: the console script (cli/entry.py) calls ``start_before_import`` with only the standard
library loaded (lock/uvstart.py), ~18 ms after exec; the lock command then calls ``start_early``, which
adopts that run, or starts one itself when envman was entered another way (``python -m``, a test).
"""

from __future__ import annotations

import atexit
import os

from envman.lock import uvstart

_pending: dict[str, uvstart.Started] = {}


def _kill_pending() -> None:
    for started in _pending.values():
        started.kill()  # the command never came to take it (a usage error, --help): no uv outlives envman
    _pending.clear()


atexit.register(_kill_pending)


def start_before_import(root: str, *, log_requests: bool) -> None:
    """Best effort: a guess that cannot be made (no remembered request, no uv, an unwritable temp folder, even
    a bug here) leaves the lock to start uv itself, in envman's error boundary."""
    try:
        started = uvstart.start_remembered(root, "pylock.toml", log_requests)
    except Exception:  # noqa: BLE001 - the speculation is optional; the real lock reports real errors
        return
    if started is not None:
        _pending[os.path.realpath(root)] = started


def start_early(root, *, upgrade: bool = False, timeout: float | None = None, progress=None):
    """A ``UvRun`` on the last lock's request (None: nothing to go on, or --upgrade)."""
    from envman.lock.uvproc import UvRun, speculate

    started = _pending.pop(os.path.realpath(str(root)), None)
    if upgrade:
        if started is not None:
            started.kill()
        return None  # --upgrade asks uv for newer pins: the last request's answer is not the one wanted
    if started is not None:
        try:
            return UvRun.adopt(started, timeout, progress)
        except (ValueError, KeyError, TypeError):
            started.kill()
    return speculate(root, "pylock.toml", timeout, progress)
