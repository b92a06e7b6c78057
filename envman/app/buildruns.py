"""Builds that run at once (own candidate tags, one build per lock hash), and sweeping what a killed one left."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from envman.process import Owner

_CANDIDATE = re.compile(r"^(?P<short>[0-9a-f]{12})-unverified-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-(?P<started>\d+)"
                        r"-[0-9a-f]{6}\Z")


def candidate_tag(short: str, owner: Owner) -> str:
    """This run's own tag; the random part keeps two builds of one process (or one second) apart too."""
    return f"{short}-unverified-{owner.label}-{os.urandom(3).hex()}"


def stale_candidates(tags: list[str], now: float | None = None) -> list[str]:
    """The candidate tags (of any lock hash) whose run is provably gone. A ``<hash>-unverified`` tag without an
    owner is a failed smoke test's image, kept for inspection: never swept."""
    return [tag for tag in tags if (m := _CANDIDATE.match(tag))
            and Owner(m.group("host"), int(m.group("pid")), int(m.group("started"))).stale(now)]


def sweep(engine, repository: str, echo: Callable[[str], None]) -> list[str]:
    """Remove what killed runs left on the engine: candidate tags of ``repository``, envman-run containers."""
    removed = []
    for name, owner in engine.run_containers():  # first: a container holds its image's tag
        o = Owner.parse(owner)
        if o is not None and o.stale():
            engine.remove_container(name)
            removed.append(name)
    for tag in stale_candidates(engine.tags_of(repository)):
        if engine.remove_image(f"{repository}:{tag}"):
            removed.append(f"{repository}:{tag}")
    if removed:
        echo(f"removed what a killed build left: {', '.join(removed)}")
    return removed


@contextlib.contextmanager
def build_lock(cache: Path, name: str, short: str, echo: Callable[[str], None]) -> Iterator[None]:
    """One build of a lock hash at a time on this machine: a second one waits, and says whose build it waits for.
    Without a writable cache folder, builds are not serialized (each still has its own tag)."""
    import fcntl

    path = cache / "builds" / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + f"-{short}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            echo(f"another envman build of {name}:{short} is running on this machine (pid {holder}): waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
