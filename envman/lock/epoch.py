"""The lock's date: the SOURCE_DATE_EPOCH every build of a lock stamps its files and config with.

It comes from the lock, never from the clock: the newest ``upload-time`` among the locked files in
pylock.toml (the environment holds nothing published later), counted over the framework's closure when
the stack has a framework, over every locked file otherwise. The framework's files only, because every
stage declares the date (image/plan.py) and a new date rebuilds every layer: an edit of the other
requirements keeps the date, and with it the framework's cached layer (the cache order's promise). A lock
whose files carry no upload time (a local index, ``--no-lock``) is dated 0, 1970-01-01, which
reproducible-builds.org's definition allows: any fixed value will do.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timezone

from packaging.utils import canonicalize_name


def source_date_epoch(pylock_text: str | None, framework: Collection[str] = ()) -> tuple[int, str]:
    """(seconds since the epoch, where they came from), from pylock.toml's text (parsed once per lock:
    lock/pylock.py). ``framework``: the names of the framework's locked closure
    (requirements.framework.lock.txt); empty: every package counts."""
    if not pylock_text:
        return 0, "no Python lock: a fixed date (1970-01-01)"
    from envman.lock.pylock import parse_pylock

    only = {canonicalize_name(n) for n in framework}
    dated = [(f.uploaded, f"{p.name} {p.version}") for p in parse_pylock(pylock_text) if not only or p.name in only
             for f in p.files if f.uploaded is not None]
    if not dated:
        return 0, "no upload time in pylock.toml: a fixed date (1970-01-01)"
    newest = max(dated, key=lambda d: d[0])  # of equals, the first by name
    when = datetime.fromtimestamp(newest[0], tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    scope = "the framework's locked files" if only else "the locked files"
    return newest[0], f"the newest upload-time among {scope} in pylock.toml: {newest[1]} ({when})"
