"""A hash-checked wheelhouse on the host for air-gapped builds (`envman fetch`, `envman build --offline`).

Every wheel of a hashed requirements lock (pip-compile/uv style: ``name==ver --hash=sha256:…``) is downloaded
for the *target* (CPython X.Y, Linux x86_64 manylinux), not for this host, by ``pip download --platform``.
Wheels already present with a hash from the lock are kept; new ones land in a staging directory, are
checked against the lock and only then renamed into place, so an interrupted fetch leaves no partial wheel.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envman.errors import EnvmanError, LockError, ToolError, UsageError
from envman.files import NO_SPACE_SAID, no_space
from envman.lock.layout import StackFiles

DEFAULT_LOCK = StackFiles().req
DEFAULT_WHEELHOUSE = ".envman/wheelhouse"  # the generated .dockerignore keeps it out of build contexts
DEFAULT_GLIBC = "2.28"
# Options a requirements file may carry that say where wheels come from; kept for pip, nothing else is.
SOURCE_OPTIONS = ("--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--trusted-host", "--no-index")


class WheelhouseError(EnvmanError):
    """A wheelhouse, or a download, whose wheels do not match the lock (a failed pip download is a ToolError)."""


@dataclass(frozen=True)
class LockedWheel:
    name: str  # canonical
    version: str
    hashes: frozenset[str]  # sha256 hex digests
    marker: str | None = None
    lineno: int = 0

    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class HashedLock:
    wheels: tuple[LockedWheel, ...]
    options: tuple[str, ...] = ()  # "--index-url https://…" lines, as written
    source: str = DEFAULT_LOCK


# ------------------------------------------------------------------------------------------------- parsing
def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Join backslash continuations and drop comments; yields (first line number, text)."""
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            yield start, buf.strip()
        buf = ""
    if buf.strip():
        yield start, buf.strip()


def parse_lock(text: str, source: str = DEFAULT_LOCK) -> HashedLock:
    """Parse a hashed lock; LockError naming every bad line (``file:line: what``) at once."""
    wheels: list[LockedWheel] = []
    options: list[str] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for n, line in _logical_lines(text):
        if line.startswith("-"):
            opt = line.split()[0].split("=", 1)[0]
            if opt in SOURCE_OPTIONS:
                options.append(line)
            elif opt not in ("--hash",):
                problems.append(f"{source}:{n}: option {opt} is not supported in a lock for fetching")
            continue
        hashes = re.findall(r"--hash[= ]([A-Za-z0-9]+):([0-9a-fA-F]+)", line)
        spec = re.split(r"\s--hash", " " + line, maxsplit=1)[0].strip()
        try:
            req = Requirement(spec)
        except InvalidRequirement as exc:
            problems.append(f"{source}:{n}: {str(exc).splitlines()[0]}")
            continue
        pins = [s for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        unpinned = _unpinned(req, pins)
        if unpinned:
            problems.append(f"{source}:{n}: {req.name} {unpinned}")
            continue
        algos = {a.lower() for a, _ in hashes}
        sha = frozenset(h.lower() for a, h in hashes if a.lower() == "sha256")
        if not sha:
            problems.append(f"{source}:{n}: {req.name}=={pins[0].version} has no --hash=sha256:… "
                            + (f"(only {', '.join(sorted(algos))})" if algos else "(regenerate the lock with hashes)"))
            continue
        name = canonicalize_name(req.name)
        if name in seen and req.marker is None:
            problems.append(f"{source}:{n}: {name} is locked twice (also line {seen[name]})")
            continue
        seen[name] = n
        wheels.append(LockedWheel(name, pins[0].version, sha, str(req.marker) if req.marker else None, n))
    if problems:
        raise LockError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                         hint="every problem:\n  " + "\n  ".join(problems) if len(problems) > 1 else None)
    return HashedLock(tuple(wheels), tuple(options), source)


def _unpinned(req: Requirement, pins: list) -> str | None:
    """Why a lock line does not pin one file a wheelhouse can hold, or None."""
    if req.url:
        return (f"is locked by URL ({req.name} @ …), which a wheelhouse cannot serve: build online, or publish it "
                "to an index and pin it by version")
    if len(pins) != 1 or len(req.specifier) != 1:
        return "is not pinned with == (a lock pins every package exactly)"
    return None


def read_lock(path: Path | str) -> HashedLock:
    path = Path(path)
    from envman.inputs import read_regular_text

    try:
        text = read_regular_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise LockError(f"cannot read the lock {path}: {why or exc}",
                         hint="run `envman lock` first, or pass --lock FILE") from None
    return parse_lock(text, str(path))


def lock_target(project: Path | str, lock_name: str = "envman.lock") -> tuple[str | None, str | None, str | None]:
    """(stack.python, glibc, CPU architecture) from <project>/envman.lock, where given: python_lock.platform
    ``"aarch64-manylinux_2_28"`` gives ``"2.28"`` and ``"aarch64"``."""
    from envman.lock.lockfile import try_read_lock

    lock = try_read_lock(Path(project) / lock_name)
    if lock is None:
        return None, None, None
    platform = str(lock.python_lock.get("platform") or "")
    glibc, arch = re.search(r"manylinux_(\d+)_(\d+)", platform), re.match(r"(x86_64|aarch64)-", platform)
    return lock.python, (f"{glibc.group(1)}.{glibc.group(2)}" if glibc else None), (arch.group(1) if arch else None)


# ------------------------------------------------------------------------------------------------ target
@dataclass(frozen=True)
class WheelTarget:
    python: str  # "3.11"
    glibc: str = DEFAULT_GLIBC
    arch: str = "x86_64"

    @property
    def py(self) -> tuple[int, int]:
        try:
            v = Version(self.python)
        except InvalidVersion:
            raise UsageError(f"not a Python version: {self.python!r}", hint="e.g. --python 3.11") from None
        return v.major, v.minor

    def platforms(self) -> list[str]:
        """manylinux_2_N down to 2_17 plus the legacy aliases: pip's --platform does not expand
        manylinux_2_N to older glibc tags by itself."""
        major, top = (int(p) for p in self.glibc.split(".")[:2])
        plats = [f"manylinux_{major}_{m}_{self.arch}" for m in range(top, 16, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        if self.arch != "x86_64":
            legacy = {17: "manylinux2014"}  # manylinux2010 and manylinux1 were x86 (and i686) only
        plats += [f"{name}_{self.arch}" for m, name in legacy.items() if m <= top]
        return plats

    def tags(self) -> set[Tag]:
        plats = self.platforms()
        return set(cpython_tags(self.py, platforms=plats)) | set(compatible_tags(self.py, platforms=plats))

    def wants(self, wheel: LockedWheel) -> bool:
        from envman.model import target_environment

        if not wheel.marker:
            return True
        try:
            return Marker(wheel.marker).evaluate(target_environment("%d.%d" % self.py, self.arch))
        except InvalidMarker:
            return True


# --------------------------------------------------------------------------------------------- checking
def sha256_file(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wheel_for(filename: str, lock: HashedLock) -> LockedWheel | None:
    """The locked package this wheel file is a build of (by name and version), if any."""
    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    for w in lock.wheels:
        if w.name == name and Version(w.version) == version:
            return w
    return None


def fits_target(filename: str, target: WheelTarget) -> bool:
    try:
        return bool(set(parse_wheel_filename(filename)[3]) & target.tags())
    except (InvalidWheelFilename, InvalidVersion):
        return False


@dataclass
class WheelhouseState:
    ok: dict[str, str] = field(default_factory=dict)  # package name -> file name
    missing: list[LockedWheel] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # "file: why"
    extra: list[str] = field(default_factory=list)  # files no locked package claims


def scan_wheelhouse(directory: Path | str, lock: HashedLock, target: WheelTarget) -> WheelhouseState:
    """Which locked wheels the wheelhouse already holds with a hash from the lock, for the target."""
    directory = Path(directory)
    state = WheelhouseState()
    files = sorted(p for p in directory.glob("*.whl") if p.is_file()) if directory.is_dir() else []
    for p in files:
        w = wheel_for(p.name, lock)
        if w is None or not target.wants(w):
            state.extra.append(p.name)
        elif not fits_target(p.name, target):
            state.extra.append(p.name)  # another platform's build: harmless, pip will not pick it
        elif sha256_file(p) not in w.hashes:
            state.bad.append(f"{p.name}: sha256 not among the lock's hashes for {w.pin()}")
        else:
            state.ok.setdefault(w.name, p.name)
    state.missing = [w for w in lock.wheels if target.wants(w) and w.name not in state.ok]
    return state


def verify_wheelhouse(directory: Path | str, lock: HashedLock, target: WheelTarget) -> WheelhouseState:
    """Every wheel the target needs is there and hash-checked; WheelhouseError otherwise."""
    state = scan_wheelhouse(directory, lock, target)
    if state.bad or state.missing:
        problems = state.bad + [f"{w.pin()}: missing" for w in state.missing]
        raise WheelhouseError(
            f"the wheelhouse {directory} does not match {lock.source}: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            hint="run `envman fetch` to (re)download what is missing or wrong",
        )
    return state


# ---------------------------------------------------------------------------------------------- fetching
def requirements_text(lock: HashedLock, wheels: Iterable[LockedWheel]) -> str:
    """A lock pip can take for the target: markers already evaluated (pip would evaluate them for this
    host, not the target), source options kept."""
    lines = [*lock.options, *(w.pin() + "".join(f" --hash=sha256:{h}" for h in sorted(w.hashes)) for w in wheels)]
    return "\n".join(lines) + "\n"


def pip_download_command(requirements: Path | str, dest: Path | str, target: WheelTarget,
                         python_exe: str | None = None) -> list[str]:
    argv = [python_exe or sys.executable, "-m", "pip", "download", "--require-hashes", "--no-deps",
            "--only-binary=:all:", "--progress-bar", "off", "--disable-pip-version-check"]
    for plat in target.platforms():
        argv += ["--platform", plat]
    major, minor = target.py
    argv += ["--python-version", f"{major}.{minor}", "--implementation", "cp", "--dest", str(dest),
             "--requirement", str(requirements)]
    return argv


@dataclass
class FetchResult:
    wheelhouse: Path
    downloaded: list[str]
    kept: list[str]
    extra: list[str]


def sweep_partials(wheelhouse: Path) -> list[str]:
    """The staging folders (``.partial-<host>-<pid>-<start>-…``) of fetches that were killed: removed when their
    process is gone (or they are a day old; an unnamed older one too). A live fetch's folder stays."""
    import shutil
    import time

    from envman.process import STALE_AFTER, Owner

    removed: list[str] = []
    try:
        entries = [e for e in os.scandir(wheelhouse) if e.name.startswith(".partial-") and e.is_dir(follow_symlinks=False)]
    except OSError:
        return removed
    for e in entries:
        owner = Owner.parse("-".join(e.name[len(".partial-"):].split("-")[:3]))
        try:
            stale = owner.stale() if owner is not None else time.time() - e.stat().st_mtime > STALE_AFTER
        except OSError:
            continue
        if stale:
            shutil.rmtree(e.path, ignore_errors=True)
            removed.append(e.name)
    return removed


FULL_WHEELHOUSE = ("free space on that disk (pip also writes to TMPDIR), or pass --wheelhouse DIR on a disk with "
                   "room; nothing half-downloaded was kept")


def _run_pip(argv: list[str], on_output: Callable[[str], None] | None,
             extra_env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    from envman.process import run_teed

    # The constraint file some hosts configure for pip (PIP_CONSTRAINT, pip.conf) pins *this* host's
    # choices; a lock already pins everything, and a constraint can only make a hashed fetch fail. An empty
    # PIP_CONSTRAINT does not override pip.conf; an empty file does. extra_env: the lock's private indexes.
    return run_teed(argv, {**(extra_env or {}), "PIP_CONSTRAINT": os.devnull}, on_output=on_output, tail_lines=30)


def fetch_wheels(lock: HashedLock, wheelhouse: Path | str, target: WheelTarget, *, python_exe: str | None = None,
                 on_output: Callable[[str], None] | None = None, env: dict[str, str] | None = None) -> FetchResult:
    """Download what the wheelhouse lacks, check each file against the lock, then move it into place."""
    from envman.process import sigterm_raises

    wheelhouse = Path(wheelhouse)
    wheelhouse.mkdir(parents=True, exist_ok=True)
    sweep_partials(wheelhouse)
    before = scan_wheelhouse(wheelhouse, lock, target)
    downloaded: list[str] = []
    todo = before.missing  # a package whose file has a wrong hash is missing too: its file is replaced
    if todo:
        from envman.process import Owner

        with sigterm_raises(), tempfile.TemporaryDirectory(prefix=f".partial-{Owner.me().label}-",
                                                           dir=wheelhouse) as staging:
            req = Path(staging) / "requirements.txt"
            req.write_text(requirements_text(lock, todo), encoding="utf-8")
            dest = Path(staging) / "wheels"
            rc, tail = _run_pip(pip_download_command(req, dest, target, python_exe), on_output, env)
            if rc != 0 and any(NO_SPACE_SAID.search(line) for line in tail):  # pip's traceback says why: not shown
                raise no_space(wheelhouse, hint=FULL_WHEELHOUSE)
            if rc != 0:
                raise ToolError(f"pip download failed (exit {rc}) for {len(todo)} wheel(s)",
                                      hint="last lines of its output:\n  " + "\n  ".join(tail[-12:]))
            got = sorted(dest.glob("*")) if dest.is_dir() else []
            problems = []
            for f in got:
                w = wheel_for(f.name, lock)
                if w is None:
                    problems.append(f"{f.name}: not in the lock")
                elif sha256_file(f) not in w.hashes:
                    problems.append(f"{f.name}: sha256 not among the lock's hashes for {w.pin()}")
            if problems:
                raise WheelhouseError(f"downloaded files do not match the lock: {problems[0]}",
                                      hint="\n  ".join(problems))
            for f in got:
                os.replace(f, wheelhouse / f.name)
                downloaded.append(f.name)
    after = verify_wheelhouse(wheelhouse, lock, target)
    kept = sorted(set(after.ok.values()) - set(downloaded))
    return FetchResult(wheelhouse, sorted(downloaded), kept, after.extra)
