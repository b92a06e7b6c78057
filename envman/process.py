"""Interruptions while envman holds a container or a build client: cleanup must run, and finish."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while envman held a container, a build client or uv; handled like Ctrl-C."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into ``Terminated`` so ``finally`` blocks run (signals only work in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Cleanup must finish: a second Ctrl-C/SIGTERM waits until it has (then acts as usual)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
