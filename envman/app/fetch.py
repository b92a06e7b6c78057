"""``envman fetch``: every wheel and sdist of a hashed lock, hash-checked, into a wheelhouse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envman.errors import UsageError
from envman.files import NO_SPACE, NoSpaceError, no_space
from envman.inputs import present, read_input
from envman.lock import wheelhouse as wh
from envman.lock.layout import StackFiles
from envman.lock.lockfile import try_read_lock


@dataclass(frozen=True)
class FetchOutcome:
    wheelhouse: Path
    downloaded: tuple[str, ...]
    kept: tuple[str, ...]
    extra: tuple[str, ...]  # other files in the wheelhouse, not in the lock for this target (left alone)
    lock_file: Path  # the hashed requirements lock read
    python: str  # target CPython X.Y
    platform: str  # the newest platform tag of the target, e.g. manylinux_2_28_x86_64
    builder_locks: tuple[str, ...] = ()  # the builder stage's locks also fetched (source sdists, build tools)

    def to_json(self) -> dict:
        return {"wheelhouse": str(self.wheelhouse), "downloaded": list(self.downloaded), "kept": list(self.kept),
                "extra": list(self.extra), "python": self.python, "platforms": self.platform,
                "builder_locks": list(self.builder_locks)}


def _verify_recorded(path: Path, lock_name: str, lock_file: Path) -> None:
    """A requirements lock that envman.lock records must be the one it records, before anything is
    downloaded: a tampered file is envman's finding (LockError naming it), not pip's."""
    from envman.app.generate import read_text_or_none
    from envman.errors import LockError
    from envman.files import sha256

    lock = try_read_lock(path / lock_name)
    if lock is None:
        return
    pl = lock.python_lock
    for key, sha_key in (("requirements", "requirements_sha256"), ("framework", "framework_sha256")):
        name, want = pl.get(key), pl.get(sha_key)
        if not name or not want or (path / name).resolve() != lock_file.resolve():
            continue
        text = read_text_or_none(lock_file)
        if text is not None and sha256(text.partition("\n")[2]) != want:
            raise LockError(f"{name} differs from the one {lock_name} records",
                            hint="regenerate it with `envman lock` (or restore it), then fetch")


def fetch_wheelhouse(path: Path, *, wheelhouse: Path | None = None, lock: Path | None = None,
                     python: str | None = None, glibc: str | None = None, profile: str | None = None,
                     on_output: Callable[[str], None] | None = None) -> FetchOutcome:
    """The target defaults to the stack.python and platform of PATH's envman lock (of ``profile``'s)."""
    from envman.lock.indexes import PLACEHOLDER

    names = StackFiles.for_profile(profile)
    lock_file = lock or path / names.req
    lock_py, lock_glibc, lock_arch = wh.lock_target(path, names.lock)
    py = python or lock_py
    if not py:
        raise UsageError(f"no Python version for the target: {path / 'envman.lock'} has no stack.python",
                         hint="pass --python 3.11 (the image's Python)")
    target = wh.WheelTarget(python=py, glibc=glibc or lock_glibc or wh.DEFAULT_GLIBC,
                            arch=lock_arch or "x86_64")
    target.tags()  # a bad --python fails here, before anything is read or downloaded
    _verify_recorded(path, names.lock, Path(lock_file))
    parsed = wh.read_lock(lock_file)
    dest = wheelhouse or path / wh.DEFAULT_WHEELHOUSE
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only checkout (a CI cache, a mounted repository): say where to put it instead
        raise UsageError(f"cannot create the wheelhouse {dest}: {exc.strerror or exc}",
                         hint="pass --wheelhouse DIR, a folder envman may write (build --offline --wheelhouse DIR "
                              "reads it)") from None
    sdists: dict[str, tuple[str, str]] = {}
    if lock is None:
        parsed, sdists = builder_inputs(path, names, parsed)
    env = _index_env(path, names)  # pip expands the lock's ${ENVMAN_INDEX_…} names from its environment
    try:
        res = wh.fetch_wheels(parsed, dest, target, on_output=on_output, env=env)
        got, had = fetch_sdists({n: (PLACEHOLDER.sub(lambda m: env.get(m.group(1), m.group(0)), u), h)
                                 for n, (u, h) in sdists.items()}, dest)
    except OSError as exc:  # envman's own writes there (the staging folder, the request file)
        if exc.errno in NO_SPACE:
            raise no_space(dest, hint=wh.FULL_WHEELHOUSE) from None
        raise
    builder = tuple(n for n in (names.source, names.build) if sdists and (path / n).is_file())
    return FetchOutcome(res.wheelhouse, tuple(res.downloaded) + got, tuple(res.kept) + had, tuple(res.extra),
                        lock_file, py, target.platforms()[0], builder)


def _index_env(path: Path, names: StackFiles) -> dict[str, str]:
    """The private indexes the lock names, as variables for pip (app/build.py finds them as a build does)."""
    from envman.app.build import private_index_values

    lock = try_read_lock(path / names.lock)
    return {i.name: i.root for i in private_index_values(path, names, lock)} if lock is not None else {}


def builder_inputs(path: Path, names: StackFiles, parsed: wh.HashedLock) -> tuple[wh.HashedLock, dict[str, tuple[str, str]]]:
    """What an offline builder stage reads besides the lock's wheels: the source-only packages are not
    wheels (pip download --only-binary would find none; their sdists come from pylock.toml's URLs instead),
    and the builder installs requirements.build.lock.txt (nvcc, setuptools …) before it builds them."""
    from envman.lock.build_deps import sdist_urls

    source = path / names.source
    if not present(source):  # a FIFO or a link loop there is named by read_lock, never read as "no source builds"
        return parsed, {}
    src = {w.name: w for w in wh.read_lock(source).wheels}
    wheels = [w for w in parsed.wheels if w.name not in src]
    build = path / names.build
    if present(build):
        have = {(w.name, w.version) for w in wheels}
        wheels += [w for w in wh.read_lock(build).wheels if (w.name, w.version) not in have]
    pylock = path / names.pylock
    urls = sdist_urls(read_input(pylock, names.pylock, 64 << 20, hint="run `envman lock` again")) if present(pylock) else {}
    missing = sorted(n for n in src if n not in urls)
    if missing:
        raise UsageError(f"{pylock} has no sdist URL for the source-only package(s) {', '.join(missing)}",
                         hint="run `envman lock` again")
    sdists = {}
    for n, w in src.items():
        url, sha = urls[n]
        if sha not in w.hashes:
            raise UsageError(f"{names.source}: {w.pin()}'s hashes do not hold the sha256 of {url.rsplit('/', 1)[-1]} "
                             f"in {names.pylock}", hint="run `envman lock` again")
        sdists[n] = (url, sha)
    return wh.HashedLock(tuple(wheels), parsed.options, parsed.source), sdists


def fetch_sdists(sdists: dict[str, tuple[str, str]], dest: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each sdist, hash-checked, beside the wheels: (downloaded, kept)."""
    from envman.files import write_atomic
    from envman.lock.build_deps import fetch_sdist

    got, had = [], []
    for _name, (url, sha) in sorted(sdists.items()):
        f = dest / url.rsplit("/", 1)[-1]
        if f.is_file() and wh.sha256_file(f) == sha:
            had.append(f.name)
            continue
        try:
            write_atomic(f, fetch_sdist(url, sha))
        except NoSpaceError:  # write_atomic's: this hint says where else to fetch
            raise no_space(dest, hint=wh.FULL_WHEELHOUSE) from None
        got.append(f.name)
    return tuple(got), tuple(had)
