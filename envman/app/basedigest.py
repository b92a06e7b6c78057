"""The base image's digest for a lock: kept from the last lock, else asked of its registry in a thread."""

from __future__ import annotations

from collections.abc import Callable

from envman.lock import registry
from envman.lock.lockfile import Lock

RETRY_AFTER = 600.0  # seconds: an unreachable registry is asked again after this long (or with --upgrade)


def start_digest(last: Lock | None, base: str, *, upgrade: bool = False) -> Callable[[], tuple[str | None, str]]:
    """A call giving ``(digest or None, the note that says where it came from)``; ``last``: the current lock.
    A registry is asked in a thread from now on."""
    kept = None if upgrade else _pinned(last, base)
    if kept:
        note = f"base image {base} pinned to {kept} (kept from the last lock; `envman lock --upgrade` asks its registry again)"
        return lambda: (kept, note)
    unpinned = f"base image {base}: no registry answered, the tag is kept and its digest is unpinned"
    ago = None if upgrade else registry.unreachable_since(base, RETRY_AFTER)
    if ago is not None:
        note = f"{unpinned} (it did not answer {ago:.0f} s ago; `envman lock --upgrade` asks it now)"
        return lambda: (None, note)
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    job = pool.submit(registry.resolve_digest, base)
    pool.shutdown(wait=False)

    def result() -> tuple[str | None, str]:
        digest = job.result()
        return digest, f"base image {base} pinned to {digest} (its registry answered)" if digest else unpinned

    return result


def _pinned(old: Lock | None, base: str) -> str | None:
    if old is None or not old.is_intact():
        return None  # no lock, or one edited by hand: its digest is not trusted
    b = old.base_image
    digest = b.get("digest")
    return digest if b.get("ref") == base and isinstance(digest, str) and digest else None
