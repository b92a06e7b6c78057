"""The ``envman`` console script: cli/main.py, tuned for a process that lives a fraction of a second."""

from __future__ import annotations

import gc
import sys


def run() -> None:
    # A short-lived process: cycles are collected every 100 000 allocations instead of 700 (importing
    # hundreds of modules otherwise pays for many collections; a long `envman build` still collects), and
    # no teardown of the modules at exit: atexit handlers run and the streams are flushed, then the process
    # ends (``_exit``). bench/bench_cli.py measures the start-up.
    gc.set_threshold(100_000, 50, 100)
    from envman.cli.main import main

    _exit(main())


def _exit(code: int) -> None:
    """End the process as Python would, minus the teardown of every module: threads that are not daemons
    are joined (``threading._shutdown``, which also stops idle executors), atexit handlers run (temporary
    folders), the streams are flushed."""
    import atexit
    import os
    import threading

    try:
        getattr(threading, "_shutdown", lambda: None)()
        getattr(atexit, "_run_exitfuncs", lambda: None)()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                code = code or 1  # stdout closed early (`envman … | head`): as Python itself reports it
        os._exit(code)
