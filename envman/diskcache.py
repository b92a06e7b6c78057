"""Values computed from envman's own data files, kept on disk under the digest of those files' bytes.

Parsing and validating YAML, or serializing what was derived from it, costs tens of milliseconds a run
and gives the same answer for the same bytes: the answer is pickled under ``<kind>-<envman version>-
<digest>`` in envman's cache folder. The version is in the name because a pickle holds envman's classes
(a new envman never reads an old one's). Any doubt — a missing, unreadable or foreign file — means the
value is computed again; a read-only cache folder only means it is computed every time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def cache_path(kind: str, digest: str) -> Path:
    from envman import __version__
    from envman.resources import cache_dir

    return cache_dir() / f"{kind}-{__version__}-{digest[:32]}.pickle"


def cached(kind: str, digest: str, compute: Callable[[], T], accept: Callable[[object], bool]) -> T:
    """The value for ``digest`` from the cache when ``accept`` takes it, else ``compute()`` (then kept)."""
    import pickle

    path = cache_path(kind, digest)
    try:
        with open(path, "rb") as fh:
            value = pickle.load(fh)
        if accept(value):
            return value  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - a cache: any failure means computing again
        pass
    value = compute()
    try:
        from envman.files import write_atomic

        write_atomic(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - a read-only home is fine
        pass
    return value
