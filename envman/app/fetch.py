"""``envman fetch`` as a use case: every wheel of a hashed lock, hash-checked, into a wheelhouse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envman.errors import UsageError


@dataclass(frozen=True)
class FetchOutcome:
    wheelhouse: Path
    downloaded: tuple[str, ...]
    kept: tuple[str, ...]
    extra: tuple[str, ...]  # other files in the wheelhouse, not in the lock for this target (left alone)
    lock_file: Path  # the hashed requirements lock read
    python: str  # target CPython X.Y
    platform: str  # the newest platform tag of the target, e.g. manylinux_2_28_x86_64

    def to_json(self) -> dict:
        return {"wheelhouse": str(self.wheelhouse), "downloaded": list(self.downloaded), "kept": list(self.kept),
                "extra": list(self.extra), "python": self.python, "platforms": self.platform}


def _verify_recorded(path: Path, lock_name: str, lock_file: Path) -> None:
    """A requirements lock that envman.lock records must be the one it records, before anything is
    downloaded: a tampered file is envman's finding (LockError naming it), not pip's."""
    from envman.errors import LockError
    from envman.files import sha256
    from envman.lock.lockfile import try_read_lock

    lock = try_read_lock(path / lock_name)
    if lock is None:
        return
    pl = lock.python_lock
    for key, sha_key in (("requirements", "requirements_sha256"), ("framework", "framework_sha256")):
        name, want = pl.get(key), pl.get(sha_key)
        if not name or not want or (path / name).resolve() != lock_file.resolve():
            continue
        try:
            body = lock_file.read_text(encoding="utf-8").partition("\n")[2] if lock_file.is_file() else None
        except (OSError, UnicodeDecodeError):
            body = ""
        if body is not None and sha256(body) != want:
            raise LockError(f"{name} differs from the one {lock_name} records",
                            hint="regenerate it with `envman lock` (or restore it), then fetch")


def fetch_wheelhouse(path: Path, *, wheelhouse: Path | None = None, lock: Path | None = None,
                     python: str | None = None, glibc: str | None = None, profile: str | None = None,
                     on_output: Callable[[str], None] | None = None) -> FetchOutcome:
    """The target defaults to the stack.python and platform of PATH's envman lock (of ``profile``'s)."""
    from envman.app.generate import Names
    from envman.lock import wheelhouse as wh

    names = Names.for_profile(profile)
    lock_file = lock or path / (names.req if profile else wh.DEFAULT_LOCK)
    lock_py, lock_glibc = wh.lock_target(path, names.lock)
    py = python or lock_py
    if not py:
        raise UsageError(f"no Python version for the target: {path / 'envman.lock'} has no stack.python",
                         hint="pass --python 3.11 (the image's Python)")
    target = wh.Target(python=py, glibc=glibc or lock_glibc or wh.DEFAULT_GLIBC,
                       arch=wh.lock_arch(path, names.lock) or "x86_64")
    target.tags()  # a bad --python fails here, before anything is read or downloaded
    _verify_recorded(path, names.lock, Path(lock_file))
    parsed = wh.read_lock(lock_file)
    dest = wheelhouse or path / wh.DEFAULT_WHEELHOUSE
    res = wh.fetch_wheels(parsed, dest, target, on_output=on_output)
    return FetchOutcome(res.wheelhouse, tuple(res.downloaded), tuple(res.kept), tuple(res.extra), lock_file, py,
                        target.platforms()[0])
