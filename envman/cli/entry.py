"""The ``envman`` console script. For `envman lock` it starts uv on the project's last request before typer
and envman are imported (app/relock.py): a re-lock of unchanged inputs then costs about what uv costs.
Everything else goes straight to cli/main.py."""

from __future__ import annotations

import gc
import sys

# `envman lock`: its options that take a value, and the flags that leave an early uv run worth starting
_VALUED = ("--base-image", "--timeout")
_FLAGS = ("--force",)


def early_lock_target(argv: list[str]) -> tuple[str, float | None] | None:
    """``(project folder, --timeout)`` when ``argv`` is a plain `lock` that may re-lock, else None. Anything
    unusual (--check, --upgrade, --help, an unknown option, a bad value) returns None: the command line is
    typer's to parse and to refuse."""
    if argv[:1] != ["lock"]:
        return None
    options: dict[str, str] = {}
    paths: list[str] = []
    rest = iter(argv[1:])
    for a in rest:
        name, eq, value = a.partition("=")
        if name in _VALUED:
            options[name] = value if eq else next(rest, "")
        elif a.startswith("-") and a not in _FLAGS:
            return None
        elif not a.startswith("-"):
            paths.append(a)
    try:
        timeout = float(options["--timeout"]) if "--timeout" in options else None
    except ValueError:
        return None
    return (paths[0] if paths else ".", timeout) if len(paths) <= 1 else None


def run() -> None:
    # A short-lived process: cycles are collected every 100 000 allocations instead of 700 (importing
    # hundreds of modules otherwise pays ~10 ms of collections; a long `envman build` still collects), and
    # no teardown of the modules at exit (~20 ms): atexit handlers run and the streams are flushed, then the
    # process ends (``_exit``). Measured with `python bench/bench_cli.py`; README "Performance".
    gc.set_threshold(100_000, 50, 100)
    target = early_lock_target(sys.argv[1:])
    if target is not None:
        from envman.app.relock import start_before_import

        root, timeout = target
        start_before_import(root, log_requests=timeout is not None or sys.stderr.isatty())
    from envman.cli.main import main

    _exit(main())


def _exit(code: int) -> None:
    """End the process as Python would, minus the teardown of every module: threads that are not daemons
    are joined (``threading._shutdown``, which also stops idle executors), atexit handlers run (temporary
    folders, a uv run nobody took), the streams are flushed."""
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
