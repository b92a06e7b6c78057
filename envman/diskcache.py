"""Data derived from envman's own data files, kept on disk under the digest of those files' bytes.

Parsing YAML costs tens of milliseconds a run and gives the same answer for the same bytes: the parsed
documents (plain JSON data, never code: no pickle) are kept as ``<kind>-<envman version>-<digest>.json`` in
envman's cache folder, and every read builds and validates the value from them again (``load``), as it would
from the YAML. Whoever can write the cache folder can therefore hand envman data, never code. Any doubt — a
missing, unreadable, oversized, non-regular or malformed file, a digest that differs, data ``load`` refuses —
is a miss: the value is computed again. A read-only cache folder only means it is computed every time.

Measured (2026-12, ``envman resolve --target h100 --json``, 31 runs, fastest of three rounds on this 2-core VM):
100–109 ms with this cache, 102–110 ms with the pickles it replaced, 126–153 ms with no cache; building the
matrix from cached JSON costs ~7 ms against ~22 ms from the YAML (unpickling cost ~2 ms).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
MAX_ENTRY = 16 * 1024 * 1024  # the matrix's documents are ~120 KB; anything far bigger is not ours
_KIND = re.compile(r"[a-z0-9][a-z0-9._-]{0,80}\Z")
_DIGEST = re.compile(r"[0-9a-f]{16,128}\Z")


def files_digest(files: Mapping[str, bytes]) -> str:
    """The digest of named files' bytes, the key of what is derived from them."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()


def cache_path(kind: str, digest: str) -> Path:
    """The entry's file: ``kind`` and ``digest`` are envman's own strings, checked (no ``/``, no ``..``)."""
    from envman import __version__
    from envman.resources import cache_dir

    if not _KIND.match(kind) or ".." in kind or not _DIGEST.match(digest):
        raise ValueError(f"not a cache key: {kind!r} {digest!r}")
    return cache_dir() / f"{kind}-{__version__}-{digest[:32]}.json"


def read_small(path: Path | str, limit: int = MAX_ENTRY) -> bytes | None:
    """A cache file's bytes, or None: a regular file only, opened without following a link and without
    blocking on a FIFO, of at most ``limit`` bytes. Every cache envman keeps is read through this."""
    from envman.inputs import read_regular

    try:
        return read_regular(path, limit, follow=False)
    except OSError:
        return None


def read_entry(path: Path, digest: str) -> Any | None:
    """The data kept at ``path`` for ``digest``, or None (a miss)."""
    raw = read_small(path)
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("digest") != digest or "data" not in entry:
        return None
    return entry["data"]


def cached(kind: str, digest: str, compute: Callable[[], Any], load: Callable[[Any], T],
           fresh: Callable[[Any], T] | None = None) -> T:
    """``load(data)``, where ``data`` is the cache's copy for ``digest`` when ``load`` accepts it (any
    exception refuses it), else ``compute()``'s (then kept). ``compute`` returns JSON data; ``load`` builds
    and validates the value from it, so the cache's data is checked exactly as fresh data is (``fresh``, when
    given, takes computed data instead: for a cache whose entries must pass a check fresh data need not)."""
    path = cache_path(kind, digest)
    data = read_entry(path, digest)
    if data is not None:
        try:
            return load(data)
        except Exception:  # noqa: BLE001 - a bad cache entry is a miss, whatever is wrong with it
            pass
    data = compute()
    value = (fresh or load)(data)  # errors here are real: they come from the data files themselves
    try:
        text = json.dumps({"digest": digest, "data": data}, separators=(",", ":"))
        if json.loads(text)["data"] == data:  # kept only when JSON gives back the same data (no int keys, dates)
            from envman.files import write_atomic

            write_atomic(path, text)
    except Exception:  # noqa: BLE001 - a read-only home, data JSON cannot hold: computed again next time
        pass
    return value
